# Istio's proxyv2 image with Wingman's pilot-agent in place of Istio's.
#
#   docker build --build-arg ISTIO_VERSION=1.28.0 -t registry.example.com/proxyv2-wingman:1.28.0 .
#
# ISTIO_VERSION must be the Istio version of the mesh: the image keeps that version's Envoy, and
# the agent reports it as ISTIO_VERSION node metadata, which istiod uses to pick what to send.
# The stamped version also picks which supported Istio release's agent Wingman follows (1.28 ..
# master; README "Supported Istio releases"): the image's own bootstrap template is rendered with
# that release's parameters.
# `pilot-agent istio-iptables` (the istio-init container) is Wingman's too: it programs the
# capture itself (package capture, with Istio's flags and rules, through the image's iptables or
# nft), so Istio's agent is not kept in the image.
# No RUN step touches the Istio stage, so the distroless variant works too
# (--build-arg ISTIO_VARIANT=-distroless).
ARG ISTIO_VERSION=1.28.0
ARG ISTIO_HUB=docker.io/istio
ARG ISTIO_VARIANT=
ARG GO_VERSION=1.26

FROM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG ISTIO_VERSION
# The Makefile's build: no cgo, the same tags, trimmed paths, stripped.
ARG TAGS=disable_pgv,grpcnotrace
RUN CGO_ENABLED=0 go build -tags "${TAGS}" -trimpath \
      -ldflags "-s -w -X main.istioVersion=${ISTIO_VERSION}" \
      -o /out/pilot-agent ./cmd/pilot-agent

FROM ${ISTIO_HUB}/proxyv2:${ISTIO_VERSION}${ISTIO_VARIANT}
COPY --from=build /out/pilot-agent /usr/local/bin/pilot-agent
