# The controller image where a registry is reachable:
#   docker build -t afe/controller:dev .
# Here (no registry) `make docker-build` builds the same static binary with
# the local Go toolchain and puts it in an image FROM scratch
# (hack/Dockerfile.scratch).
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot
FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY access/ access/
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY docker/ docker/
COPY internal/ internal/
COPY move/ move/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /manager ./cmd/manager

FROM ${BASE_IMAGE}
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
