package main

import (
	"context"
	"time"

	"github.com/wingman-mesh/wingman/certs/gcetoken"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/lifecycle"
	"github.com/wingman-mesh/wingman/internal/istiolog"
)

// credentialService fills the token file with the platform's credential when
// CREDENTIAL_FETCHER_TYPE asks for one (GoogleComputeEngine), as Istio's agent does for VMs: the
// CA client and the xDS upstream then read it per call like a Kubernetes token. It is nil for the
// default JWT type. Start makes one bounded attempt so the first CSR usually finds a token; a
// failure is not fatal (the metadata server may come up later): Run retries with backoff and
// refreshes before expiry.
func credentialService(a *agent) (*lifecycle.Service, error) {
	if a.env.CredentialFetcherType != "GoogleComputeEngine" {
		return nil, nil
	}
	f, err := gcetoken.New(gcetoken.Config{
		MetadataHost: a.env.GCEMetadataHost, Audience: a.env.TrustDomain, Path: tokenPath,
		Log: a.logger(istiolog.ScopeGCECred),
	})
	if err != nil {
		return nil, err
	}
	return &lifecycle.Service{
		Name: "credential", KeepDuringDrain: true,
		Start: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := f.Fetch(ctx); err != nil {
				a.log.Warn("no GCE identity token yet; retrying in the background", "err", err)
			}
			return nil
		},
		Run: f.Run,
	}, nil
}
