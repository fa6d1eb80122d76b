package main

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/wingman-mesh/wingman/bootstrap"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/options"
	"github.com/wingman-mesh/wingman/cmd/pilot-agent/platform"
)

// platformWait bounds how long a render waits for the platform's metadata beyond what the
// detection and metadata timeouts already bound; detection starts with the agent, so by the time
// the bootstrap renders it has normally finished.
const platformWait = 2 * time.Second

// bootstrapFacts sets the parts of bootstrap.Config that come from the node identity, the
// environment, the platform and the build: the node type (every type Istio knows), the Istio
// version reported in the node metadata, HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED, and
// PLATFORM_METADATA with the platform's locality, and the credential key when a credential
// fetcher's socket answers. It also writes the Lightstep access token the
// bootstrap points Envoy at, as Istio's agent does while rendering.
func bootstrapFacts(a *agent, c *bootstrap.Config) {
	if err := bootstrap.WriteLightstepToken(a.proxyConfig); err != nil {
		a.log.Error("Envoy will not find the Lightstep token", "err", err)
	}
	c.NodeType = bootstrap.NodeType(a.identity.Type)
	c.IstioVersion = compatIstioVersion()
	c.KeepFragmentInPath = !a.env.HTTPStripFragmentFromPath
	c.CredentialSocketExists = credentialSocketHealthy(bootstrap.DefaultCredentialSocket)
	if a.platform != nil {
		ctx, cancel := context.WithTimeout(context.Background(), platformWait)
		f := a.platform.Facts(ctx)
		cancel()
		c.PlatformMetadata, c.PlatformLocality = f.Metadata, f.Locality
	}
}

// credentialSocketHealthy says whether a credential-fetcher SDS server answers at path (Istio sets
// the node metadata key credential: "true" then): the file is a socket that accepts a connection.
func credentialSocketHealthy(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	c, err := net.DialTimeout("unix", path, 100*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// platformConfig is platform detection's view of the environment: CLOUD_PLATFORM, GCP_METADATA,
// and the metadata servers' addresses under the names the clouds' own SDKs read
// (GCE_METADATA_HOST, AWS_EC2_METADATA_SERVICE_ENDPOINT).
func platformConfig(env *options.Env) platform.Config {
	return platform.Config{CloudPlatform: env.CloudPlatform, GCPMetadata: env.GCPMetadata,
		GCPQuotaProject: env.GCPQuotaProject, GCPZone: env.GCPZone, ResolvConf: resolvConfPath, GCEMetadataHost: env.GCEMetadataHost, AWSMetadataURL: env.AWSMetadataEndpoint}
}
