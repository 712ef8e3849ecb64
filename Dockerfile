# syntax=docker/dockerfile:1
#
# One image for every Berth binary: booking, router and readmodel.
# Pick the binary with the command, e.g.
#
#   docker run --rm IMAGE booking serve --region us-east
#   docker run --rm IMAGE router serve --region us-east
#   docker run --rm IMAGE readmodel serve
#   docker run --rm IMAGE booking migrate
#
# The Kubernetes manifests in deploy/k8s set `command:` the same way.

# Keep in step with the `go` line of go.mod, so the builder never has to
# download a newer toolchain during the build.
ARG GO_VERSION=1.26.8

# --platform=$BUILDPLATFORM: compile natively and cross-compile with
# GOOS/GOARCH instead of emulating the target (fast multi-arch builds).
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src

# Dependencies first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .
# CGO_ENABLED=0: fully static binaries for the distroless/static base.
# -trimpath: no local paths in binaries (reproducible, no path leaks).
# -s -w: drop symbol table and DWARF (smaller image).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/ \
        ./cmd/booking ./cmd/router ./cmd/readmodel

# distroless/static: no shell, no package manager, CA certificates and tzdata
# included (the clinic slots are materialized in each clinic's time zone).
# The :nonroot tag runs as uid/gid 65532. Pinned by tag; for byte-for-byte
# reproducible deployments pin the digest too (…:nonroot@sha256:…).
FROM gcr.io/distroless/static-debian12:nonroot

# The SQL migrations (schema/ and schema/cockroach/) are embedded in the
# booking binary (package schema), so the binaries are all the image needs.
COPY --from=build /out/booking /out/router /out/readmodel /usr/local/bin/

USER 65532:65532
EXPOSE 8080

# No ENTRYPOINT on purpose: the first word of the command selects the binary.
CMD ["booking", "--help"]
