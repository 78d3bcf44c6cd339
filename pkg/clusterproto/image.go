package clusterproto

import "strings"

// ImageRegistry is the registry host an image reference pulls from, as
// the Docker engine and the kubelet read it: the first path component when
// it holds a '.' or a ':' or is "localhost", else Docker Hub ("docker.io").
// Lower case. A registry credential is given only for an image of its own
// server, so that naming an image elsewhere cannot send its password there.
func ImageRegistry(image string) string {
	first, _, found := strings.Cut(image, "/")
	if !found || !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io"
	}
	return RegistryHost(first)
}

// RegistryHost is a registry server named the way ImageRegistry names one:
// lower case, Docker Hub's other names as docker.io.
func RegistryHost(server string) string {
	s := strings.ToLower(server)
	switch s {
	case "index.docker.io", "registry-1.docker.io":
		return "docker.io"
	}
	return s
}
