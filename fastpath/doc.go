// Package fastpath is Wingman's wire-level codec for xDS messages. It holds gRPC messages as the
// buffers the transport received them in ([Frame]), reads the few fields the proxy needs (type
// URL, nonce, versions, resource names, the presence of an error) straight from the protobuf wire
// bytes across buffer boundaries (requests with a [Cursor], responses, whole or streamed, with the
// one [ResponseScanner]), and builds the handful of messages the agent
// originates (its own subscriptions, ACKs and NACKs, replayed subscriptions).
//
// It knows nothing about streams and imports no other part of Wingman. Every length read from the
// wire is bounded by what remains of the input before it is used.
package fastpath
