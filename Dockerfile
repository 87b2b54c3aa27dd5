# chatmem's container image: a static binary on an empty base (no shell, no
# package manager), running as a non-root user, serving on 0.0.0.0:8080.
#
#   docker build -t chatmem .
#   docker run -p 127.0.0.1:8080:8080 -e CHATMEM_API_KEYS=acme:KEY -v chatmem-data:/data chatmem
#
# Without API keys serve refuses an address other than loopback, and a
# container's is not loopback: set CHATMEM_API_KEYS, or, where nothing but
# you can reach the port, CHATMEM_INSECURE=true (one tenant, no
# authentication). The SQLite default lives in the /data volume;
# CHATMEM_STORE (or --store) names a PostgreSQL or Redis store instead.
# Stamp a release with --build-arg VERSION=v1.2.3.
#
# .ci/container builds the same final stage from a binary built on the host,
# for machines whose builds cannot pull the golang image: it takes everything
# from the last FROM on, with "--from=build " and "/out/" removed from the
# COPY lines.

FROM docker.io/library/golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN set -eu; \
    pkg=github.com/chatmem/chatmem/internal/buildinfo; \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${VERSION:+-X $pkg.version=$VERSION}" \
      -o /out/rootfs/chatmem ./cmd/chatmem; \
    mkdir -p /out/rootfs/etc/ssl/certs /out/rootfs/tmp /out/data; \
    chmod 1777 /out/rootfs/tmp; \
    cp /etc/ssl/certs/ca-certificates.crt /out/rootfs/etc/ssl/certs/

FROM scratch
# The binary, the CA certificates the chat proxy and the model clients need
# for HTTPS, and /tmp; then /data, owned by the user that writes it.
COPY --from=build /out/rootfs/ /
COPY --from=build --chown=65532:65532 /out/data/ /data/
USER 65532:65532
ENV CHATMEM_ADDR=0.0.0.0:8080 \
    CHATMEM_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/chatmem", "healthcheck", "--url", "http://127.0.0.1:8080/healthz", "--timeout", "4s"]
ENTRYPOINT ["/chatmem"]
CMD ["serve"]
