//go:build !grpcxds

package main

import (
	"context"
	"fmt"
)

// proxyless needs google.golang.org/grpc/xds, whose modules (go-spiffe, x/oauth2, ...) are
// not yet in go.mod; build with -tags grpcxds once they are (see proxyless.go).
func (d *demo) proxyless(context.Context) (string, error) {
	return "this build has no xDS-enabled gRPC (google.golang.org/grpc/xds is not in go.mod yet; see demo/proxyless.go)", fmt.Errorf("%w", errSkip)
}

// proxylessBuilt says this build has the proxyless gRPC step.
const proxylessBuilt = false
