package istiod

import (
	"context"
	"crypto/tls"
	"net/http"
)

// TLSConfig is the TLS policy of cfg for a client that speaks HTTP/2 itself (the xDS proxy's
// upstream): the same roots, server name, client certificate and compliance rules as [Dial], with
// ALPN h2. It is nil when cfg is plaintext.
func TLSConfig(cfg Config) (*tls.Config, error) {
	if cfg.IsPlaintext() {
		return nil, nil
	}
	tc, err := tlsConfig(&cfg)
	if err != nil {
		return nil, err
	}
	tc.NextProtos = []string{"h2"}
	return tc, nil
}

// StreamHeader returns the metadata [Dial] sends on every call (ClusterID, cfg.Metadata and the
// bearer token, read afresh each time) as HTTP request headers, for such a client.
func StreamHeader(cfg Config) func(ctx context.Context) (http.Header, error) {
	kv := headers(&cfg)
	tok := tokenCreds{file: cfg.TokenFile}
	return func(ctx context.Context) (http.Header, error) {
		h := make(http.Header, len(kv)/2+1)
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1]) // gRPC metadata keys are lower-cased on the wire; HTTP/2 does so too
		}
		md, err := tok.GetRequestMetadata(ctx)
		if err != nil {
			return nil, err
		}
		for k, v := range md {
			h.Set(k, v)
		}
		return h, nil
	}
}
