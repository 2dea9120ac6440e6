# Static, non-root hookpace image.
#   docker build -t hookpace .
#   docker run -v hookpace-spool:/var/lib/hookpace -p 8080:8080 hookpace
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# hookpace version prints these (docker build --build-arg VERSION=v1.2.3
# --build-arg COMMIT=$(git rev-parse HEAD)); the build has no .git to stamp.
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/hookpace/hookpace/cli.Version=${VERSION} -X github.com/hookpace/hookpace/cli.Commit=${COMMIT}" -o /out/hookpace ./cmd/hookpace

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookpace /usr/local/bin/hookpace
COPY examples/container.yaml /etc/hookpace/config.yaml
# examples/container.yaml listens on all interfaces of the container; the
# admin API stays on localhost (reach it with kubectl exec or port-forward).
USER nonroot:nonroot
VOLUME /var/lib/hookpace
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hookpace"]
CMD ["run", "--config", "/etc/hookpace/config.yaml"]
