package istiod

import (
	"context"
	"crypto/tls"
	"net/http"
)

// TLSConfig is the TLS policy of cfg for a client that speaks HTTP/2 itself (transport/h2grpc:
// the xDS proxy's upstream, the CA client): the roots re-read when they change, the server
// name, the client certificate and the compliance rules, with ALPN h2. It is nil when cfg is
// plaintext, and an error when the roots cannot be read now.
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

// StreamHeader returns the metadata sent on every call (ClusterID, cfg.Metadata and the bearer
// token, read afresh each time) as HTTP request headers, for such a client.
func StreamHeader(cfg Config) func(ctx context.Context) (http.Header, error) {
	kv := headers(&cfg)
	return func(context.Context) (http.Header, error) {
		h := make(http.Header, len(kv)/2+1)
		for i := 0; i < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1]) // gRPC metadata keys are lower-cased on the wire; HTTP/2 does so too
		}
		tok, err := readToken(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		if tok != "" {
			h.Set("authorization", "Bearer "+tok)
		}
		return h, nil
	}
}
