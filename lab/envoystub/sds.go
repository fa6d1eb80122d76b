package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretv3 "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

const secretType = resourcev3.SecretType

// runSDS opens one SDS stream per secret, as Envoy does for each SdsSecretConfig, asking for
// "default" and "ROOTCA", and ACKs every push until ctx is done.
func runSDS(ctx context.Context, bs *bootstrap, ev *events, st *state) error {
	cc, err := dialPipe(bs.sdsPipe)
	if err != nil {
		return fmt.Errorf("sds dial %s: %w", bs.sdsPipe, err)
	}
	defer cc.Close()
	c := secretv3.NewSecretDiscoveryServiceClient(cc)
	var wg sync.WaitGroup
	for _, name := range []string{"default", "ROOTCA"} {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := sdsStream(ctx, c, bs, name, ev, st)
				if ctx.Err() != nil {
					return
				}
				ev.emit(event{Ev: "sds_error", Name: name, Err: err.Error()})
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	return nil
}

func sdsStream(ctx context.Context, c secretv3.SecretDiscoveryServiceClient, bs *bootstrap, name string, ev *events, st *state) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := c.StreamSecrets(ctx)
	if err != nil {
		return fmt.Errorf("open SDS stream for %s: %w", name, err)
	}
	if err := s.Send(&discovery.DiscoveryRequest{Node: bs.node, TypeUrl: secretType, ResourceNames: []string{name}}); err != nil {
		return fmt.Errorf("send SDS request for %s: %w", name, err)
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("SDS stream for %s closed by the agent", name)
			}
			return fmt.Errorf("SDS receive for %s: %w", name, err)
		}
		t := time.Now().UnixNano()
		if err := checkSecret(resp, name); err != nil {
			return err
		}
		if name == "default" {
			st.certs.Add(1)
		}
		ev.emit(event{Ev: "sds", Name: name, Version: resp.VersionInfo, Bytes: proto.Size(resp), T: t})
		if err := s.Send(&discovery.DiscoveryRequest{TypeUrl: secretType, ResourceNames: []string{name},
			VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
			return fmt.Errorf("send SDS ACK for %s: %w", name, err)
		}
	}
}

// checkSecret decodes the secret and checks it holds what Envoy needs for name.
func checkSecret(resp *discovery.DiscoveryResponse, name string) error {
	if len(resp.Resources) != 1 {
		return fmt.Errorf("SDS response for %s has %d resources, want 1", name, len(resp.Resources))
	}
	var sec tlsv3.Secret
	if err := resp.Resources[0].UnmarshalTo(&sec); err != nil {
		return fmt.Errorf("SDS secret %s: %w", name, err)
	}
	if sec.Name != name {
		return fmt.Errorf("SDS secret is named %q, want %q", sec.Name, name)
	}
	if name == "ROOTCA" {
		if len(sec.GetValidationContext().GetTrustedCa().GetInlineBytes()) == 0 {
			return errors.New("SDS ROOTCA has no trusted CA bytes")
		}
		return nil
	}
	tc := sec.GetTlsCertificate()
	if len(tc.GetCertificateChain().GetInlineBytes()) == 0 || len(tc.GetPrivateKey().GetInlineBytes()) == 0 {
		return fmt.Errorf("SDS secret %s has no certificate chain or key", name)
	}
	return nil
}
