# Build the manager binary
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Copy the Go Modules manifests
COPY go.mod go.mod
COPY go.sum go.sum
# The guard is a module of its own that go.mod replaces with its directory:
# its go.mod must be there before the download.
COPY pkg/featuregate/go.mod pkg/featuregate/go.mod
COPY pkg/featuregate/go.sum pkg/featuregate/go.sum
# cache deps before building and copying source so that we don't need to re-download as much
# and so that source changes don't invalidate our downloaded layer
RUN go mod download

# Copy the go source
COPY main.go main.go
COPY api/ api/
COPY controllers/ controllers/
COPY pkg/ pkg/
COPY internal/ internal/

# Build
# GOARCH is left to the platform being built for (docker buildx sets
# TARGETARCH); empty, it is the builder's own.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o manager .

# Use distroless as minimal base image to package the manager binary
# Refer to https://github.com/GoogleContainerTools/distroless for more details
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
# The health probes (/healthz, /readyz) and the secured metrics of
# config/manager/manager.yaml. test/framework/image builds the same image without
# Docker (make test-cluster); TestOCIImageMatchesDockerfile keeps them equal.
EXPOSE 8081/tcp 8443/tcp

ENTRYPOINT ["/manager"]
