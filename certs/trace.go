package certs

// traceStage is a point on a rotation's path from the CA's answer to the new secret handed to gRPC
// on an SDS stream. Config.trace, set only by tests and benchmarks, is called at each, so the path
// can be timed from the inside without sleeps; it is nil in production (one nil check per stage).
type traceStage uint8

const (
	traceAnswer    traceStage = iota // the CA client's call returned a signed chain
	traceParsed                      // the chain is parsed (certificates and their PEM)
	traceChecked                     // the chain is checked: SAN, key, validity, signatures
	traceBuilt                       // the workload and its secret are built (the first stream encodes it)
	tracePublished                   // the secret is in the store and every watcher is woken
	traceWoken                       // an SDS stream's goroutine took a wake-up
	traceEncoded                     // that stream's DiscoveryResponse is encoded
	traceSent                        // that stream's Send returned (the response is with gRPC)
	numTraceStages
)

// mark calls the trace hook, when one is set.
func (c *Config) mark(s traceStage) {
	if c.trace != nil {
		c.trace(s)
	}
}
