# syntax=docker/dockerfile:1
# kube-reclaim image: one static binary per command on distroless, non-root.
#   make image                    (docker build -t ghcr.io/kube-reclaim/kube-reclaim:$VERSION .)
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .
# The Deployments in deploy/ run `kube-reclaim <role> ...` (ENTRYPOINT plus args).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    set -eu; \
    ldflags="-s -w -X github.com/kube-reclaim/kube-reclaim/internal/version.Version=${VERSION}"; \
    mkdir -p /out; \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "${ldflags}" -o /out/kube-reclaim ./cmd/kube-reclaim; \
    if [ -d cmd/kubectl-reclaim ]; then \
      GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "${ldflags}" -o /out/kubectl-reclaim ./cmd/kubectl-reclaim; \
    fi

FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.source="https://github.com/kube-reclaim/kube-reclaim" \
      org.opencontainers.image.description="kube-reclaim: publish idle requested CPU and memory as extended resources and schedule batch pods onto it"
# /out holds kube-reclaim and, when the command exists, the kubectl-reclaim plugin.
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kube-reclaim"]
