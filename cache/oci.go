package cache

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// wasmLayerType is the layer of the OCI Wasm artifact layout: the raw module.
const wasmLayerType = "application/vnd.module.wasm.content.layer.v1+wasm"

// ociFetcher pulls modules from registries with go-containerregistry, in the layouts Istio's
// pkg/wasm/imagefetcher.go reads: a Docker or OCI image whose last layer is a gzipped tar
// holding plugin.wasm (the "compat" layout), or an OCI artifact with a raw Wasm layer.
type ociFetcher struct {
	transport, insecureTransport http.RoundTripper
	max                          int64
}

func newOCIFetcher(o *Options, g *guard) *ociFetcher {
	mk := func(insecure bool) http.RoundTripper {
		t := remote.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = g.DialContext // registry, token realm and blob redirects alike
		if insecure {
			t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // #nosec G402: WASM_INSECURE_REGISTRIES
		}
		return t
	}
	return &ociFetcher{transport: mk(false), insecureTransport: mk(true), max: o.MaxModuleBytes}
}

// prepare resolves the image's manifest (not its layers) and returns it with its digest (hex),
// so the cache can be checked against the digest before any layer is pulled.
func (f *ociFetcher) prepare(ctx context.Context, ref string, insecure bool, secret []byte) (v1.Image, string, error) {
	var nopts []name.Option
	t := f.transport
	if insecure {
		nopts = append(nopts, name.Insecure)
		t = f.insecureTransport
	}
	r, err := name.ParseReference(ref, nopts...)
	if err != nil {
		return nil, "", fmt.Errorf("could not parse url in image reference: %w", err)
	}
	var kc authn.Keychain = authn.DefaultKeychain // Istio: DOCKER_CONFIG when no pull secret
	if secret != nil {
		kc = &secretKeychain{data: secret}
	}
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(t), remote.WithAuthFromKeychain(kc)}
	desc, err := remote.Get(r, ropts...)
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response") {
		// As Istio (after helm): a registry that answers plain HTTP is fetched over HTTP.
		if r, err = name.ParseReference(ref, name.Insecure); err == nil {
			desc, err = remote.Get(r, ropts...)
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("could not fetch manifest: %w", err)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, "", fmt.Errorf("could not fetch image: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, "", fmt.Errorf("could not fetch image: %w", err)
	}
	return img, d.Hex, nil
}

// extract pulls the module out of the image.
func (f *ociFetcher) extract(img v1.Image) ([]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("could not retrieve manifest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("could not fetch layers: %w", err)
	}
	if len(layers) == 0 {
		return nil, errors.New("number of layers must be greater than zero")
	}
	last := layers[len(layers)-1]
	mt, err := last.MediaType()
	if err != nil {
		return nil, fmt.Errorf("could not get media type: %w", err)
	}
	if m.MediaType == types.DockerManifestSchema2 {
		if mt != types.DockerLayer {
			return nil, fmt.Errorf("could not extract Wasm file from the image as Docker container: invalid media type %s (expect %s)", mt, types.DockerLayer)
		}
		return f.pluginFromTarGz(last)
	}
	if mt == types.OCILayer {
		return f.pluginFromTarGz(last)
	}
	for _, l := range layers {
		if mt, err := l.MediaType(); err == nil && mt == wasmLayerType {
			return f.readLayer(l)
		}
	}
	return nil, fmt.Errorf("the given image is in invalid format as an OCI image: no %s layer and last layer is %s, not %s", wasmLayerType, mt, types.OCILayer)
}

// readLayer reads a layer's stored bytes, refusing one larger than the cap before reading it.
func (f *ociFetcher) readLayer(l v1.Layer) ([]byte, error) {
	if n, err := l.Size(); err == nil && n > f.max {
		return nil, fmt.Errorf("%w: layer is %d bytes, limit %d", errTooLarge, n, f.max)
	}
	rc, err := l.Compressed() // the artifact's layer is the raw module, whatever the type says
	if err != nil {
		return nil, fmt.Errorf("could not get layer content: %w", err)
	}
	defer rc.Close()
	return readCapped(rc, f.max)
}

// pluginFromTarGz finds plugin.wasm in a gzipped tar layer.
func (f *ociFetcher) pluginFromTarGz(l v1.Layer) ([]byte, error) {
	if n, err := l.Size(); err == nil && n > f.max {
		return nil, fmt.Errorf("%w: layer is %d bytes, limit %d", errTooLarge, n, f.max)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("could not get layer content: %w", err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to parse layer as tar.gz: %w", err)
	}
	tr := tar.NewReader(io.LimitReader(zr, f.max+64<<10))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("plugin.wasm not found in the archive")
		}
		if err != nil {
			return nil, fmt.Errorf("could not extract wasm binary: %w", err)
		}
		if path.Base(h.Name) != "plugin.wasm" {
			continue
		}
		if h.Size > f.max {
			return nil, fmt.Errorf("%w: plugin.wasm is %d bytes, limit %d", errTooLarge, h.Size, f.max)
		}
		return readCapped(tr, f.max)
	}
}

// secretKeychain resolves credentials from an image pull secret's docker config JSON, as
// Istio's wasmKeyChain (which reads it with docker's configfile).
type secretKeychain struct{ data []byte }

type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
		RegistryToken string `json:"registrytoken"`
	} `json:"auths"`
}

func (k *secretKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(k.data, &cfg); err != nil {
		return nil, fmt.Errorf("image pull secret is not a docker config: %w", err)
	}
	reg := target.RegistryStr()
	keys := []string{reg, "https://" + reg, "http://" + reg}
	if reg == name.DefaultRegistry {
		keys = append(keys, authn.DefaultAuthKey)
	}
	for _, key := range keys {
		a, ok := cfg.Auths[key]
		if !ok {
			continue
		}
		ac := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("image pull secret: bad auth for %s: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("image pull secret: bad auth for %s", key)
			}
			ac.Username, ac.Password = user, pass
		}
		return authn.FromConfig(ac), nil
	}
	return authn.Anonymous, nil
}
