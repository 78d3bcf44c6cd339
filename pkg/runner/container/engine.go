package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"
)

// pingTimeout bounds the look at each candidate engine.
const pingTimeout = 2 * time.Second

// Sockets are the engines Find tries after DOCKER_HOST: docker's default,
// then podman's rootful and rootless API sockets.
func Sockets() []string {
	s := []string{"unix:///var/run/docker.sock", "unix:///run/podman/podman.sock"}
	if xdg := os.Getenv("XDG_RUNTIME_DIR"); xdg != "" {
		s = append(s, "unix://"+filepath.Join(xdg, "podman", "podman.sock"))
	}
	return s
}

// ErrNoEngine is Find's error when no engine answers.
var ErrNoEngine = errors.New("no container engine answers")

// Find returns the host of the engine to use: DOCKER_HOST when it is set
// (and answers: it is not passed over for another), else the first of
// Sockets that answers.
func Find(ctx context.Context) (string, error) {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if err := Ping(ctx, h); err != nil {
			return "", fmt.Errorf("%w: DOCKER_HOST=%s: %v", ErrNoEngine, h, err)
		}
		return h, nil
	}
	for _, h := range Sockets() {
		if Ping(ctx, h) == nil {
			return h, nil
		}
	}
	return "", fmt.Errorf("%w (DOCKER_HOST is unset; tried %v)", ErrNoEngine, Sockets())
}

// Ping checks that the engine at host answers the Docker Engine API.
func Ping(ctx context.Context, host string) error {
	c, err := client.New(client.WithHost(host))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	_, err = c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}
