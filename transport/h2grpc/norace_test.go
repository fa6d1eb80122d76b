//go:build !race

package h2grpc

const raceEnabled = false
