// Package enginespec holds the value types the controller's rules and the
// engine share: what a container, a volume and a network should be
// (ContainerSpec, VolumeSpec, NetworkSpec), what the engine reports of them
// (Container, Volume, Network) and the engine's runtimes (Runtime).
//
// It imports nothing but the standard library, so that the pure rules
// (internal/plan, internal/sandboxspec, internal/hostaddrs) decide without
// linking the Docker SDK; package docker, the only one that talks to the
// engine, names these types under its own names (docker.ContainerSpec is
// enginespec.ContainerSpec).
package enginespec
