// Package mux is Wingman's xDS proxy. It serves the Aggregated Discovery Service (state of the
// world and Delta) to Envoy and proxyless gRPC clients on a Unix socket, and carries every
// downstream stream as its own stream over ONE gRPC connection to Istiod for the agent's
// lifetime. Messages move as raw frames (see package fastpath): the proxy reads only the type
// URL, nonce, versions and names it needs for bookkeeping, and never decodes resources, except
// those of the agent's own subscriptions (NameTable, ProxyConfig), which it consumes.
//
// When the upstream stream fails, the downstream stays open: the proxy reconnects with jittered
// exponential backoff and replays each type's latest subscription, so the client never sees the
// outage. Memory is bounded whatever the speed of either side: a state-of-the-world message
// still waiting to be sent is replaced by a newer one of the same type, Delta messages wait for
// room, and nothing in the response direction ever waits on the request direction, so the two
// directions cannot deadlock each other.
package mux
