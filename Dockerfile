# Static, non-root hookpace image. From a git checkout:
#   docker build --build-arg COMMIT=$(git rev-parse HEAD) -t REGISTRY/hookpace:TAG .
#   docker push REGISTRY/hookpace:TAG
#   docker run -v hookpace-spool:/var/lib/hookpace -p 8080:8080 REGISTRY/hookpace:TAG
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# hookpace version prints VERSION (default: the source's cli/VERSION) and
# COMMIT (default: "unknown"). The build context has no .git
# (.dockerignore), so nothing but these build args can stamp the image.
ARG VERSION=""
ARG COMMIT=""
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -X github.com/hookpace/hookpace/cli.Version=${VERSION} -X github.com/hookpace/hookpace/cli.Commit=${COMMIT}" -o /out/hookpace ./cmd/hookpace

# The init container of `hookpace inject --capture`: hookpace and
# iptables (Debian's, nf_tables backend), run once as root with NET_ADMIN
# and NET_RAW to apply `hookpace capture rules --apply` in the pod's
# network namespace. Not the default target:
#   docker build --target capture-init -t REGISTRY/hookpace-capture-init:TAG .
FROM debian:12-slim AS capture-init
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends iptables && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/hookpace /usr/local/bin/hookpace
ENTRYPOINT ["/usr/local/bin/hookpace"]
CMD ["capture", "rules", "--help"]

# The default target, the last stage: hookpace itself.
FROM gcr.io/distroless/static-debian12:nonroot
ARG COMMIT=""
LABEL org.opencontainers.image.title="hookpace" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${COMMIT}"
COPY --from=build /out/hookpace /usr/local/bin/hookpace
COPY examples/container.yaml /etc/hookpace/config.yaml
# examples/container.yaml listens on all interfaces of the container; the
# admin API stays on localhost (reach it with kubectl exec or port-forward).
# nonroot is uid 65532, which the chart's securityContext names.
USER nonroot:nonroot
VOLUME /var/lib/hookpace
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/hookpace"]
CMD ["run", "--config", "/etc/hookpace/config.yaml"]
