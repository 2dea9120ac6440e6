// Posts webhooks with Java's HttpClient, as an app would. Java reads no
// proxy or CA variables: JAVA_TOOL_OPTIONS carries -Dhttps.proxyHost/Port
// (the default ProxySelector reads them) and -Djavax.net.ssl.trustStore
// (hookpace's truststore.p12). Prints the status and X-Hookpace-Id of each
// answer.
//
//   java Sender.java URL COUNT
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Sender {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        int n = Integer.parseInt(args[1]);
        for (int i = 1; i <= n; i++) {
            HttpRequest req = HttpRequest.newBuilder(URI.create(args[0]))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{\"via\":\"java\",\"n\":" + i + "}"))
                .build();
            HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
            System.out.println(resp.statusCode() + " " + resp.headers().firstValue("x-hookpace-id").orElse(""));
        }
    }
}
