package main

import "github.com/wingman-mesh/wingman/bootstrap"

// bootstrapFacts sets the parts of bootstrap.Config that come from the node identity, the
// environment and the build: the node type (every type Istio knows), the Istio version reported
// in the node metadata, and the runtime flag HTTP_STRIP_FRAGMENT_FROM_PATH_UNSAFE_IF_DISABLED.
func bootstrapFacts(a *agent, c *bootstrap.Config) {
	c.NodeType = bootstrap.NodeType(a.identity.Type)
	c.IstioVersion = compatIstioVersion()
	c.KeepFragmentInPath = !a.env.HTTPStripFragmentFromPath
}
