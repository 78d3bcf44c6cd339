package container

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/runner"
)

// imageUser is the user the image's configuration names ("" for root by
// default), pulling the image as its pull policy says: always, only when
// the engine has none, or never. An image the runner pulled with a
// registry credential is pulled again (its registry asked again) for a
// pod without that credential, or refused under never: one project's
// private image on the node is not another's to run, as Kubernetes'
// "ensure secret pulled images" does. The record is the runner's (its
// data directory): runners sharing one engine (runway dev's nodes) do not
// see each other's.
func (r *Runner) imageUser(ctx context.Context, spec runner.Spec) (string, error) {
	image := spec.Image
	pull := spec.PullPolicy == runner.PullAlways
	ictx, cancel := context.WithTimeout(ctx, apiTimeout)
	res, err := r.cli.ImageInspect(ictx, image)
	cancel()
	switch {
	case cerrdefs.IsNotFound(err) && spec.PullPolicy == runner.PullNever:
		return "", fmt.Errorf("image %s is not on the node, and its pull policy is never", image)
	case cerrdefs.IsNotFound(err):
		pull = true
	case err != nil:
		return "", fmt.Errorf("image %s: %w", image, err)
	case !pull:
		if by := r.pulledWith(image); by != "" && by != credentialOf(spec) {
			if spec.PullPolicy == runner.PullNever {
				return "", fmt.Errorf("image %s on the node was pulled with a credential this workload does not name, and its pull policy is never", image)
			}
			pull = true
		}
	}
	if pull {
		if err := r.pull(ctx, spec); err != nil {
			return "", err
		}
		ictx, cancel := context.WithTimeout(ctx, apiTimeout)
		res, err = r.cli.ImageInspect(ictx, image)
		cancel()
		if err != nil {
			return "", fmt.Errorf("image %s: %w", image, err)
		}
	}
	if res.Config == nil {
		return "", nil
	}
	return res.Config.User, nil
}

// pullTimeout bounds an image pull.
const pullTimeout = 30 * time.Minute

// credentialOf is the registry credential a pod's image is pulled with:
// its own where it is of the image's registry (the workload service checks
// that at submit; this keeps the password from any other registry), else
// none ("").
func credentialOf(spec runner.Spec) string {
	if a := spec.Registry; a != nil && clusterproto.RegistryHost(a.Server) == clusterproto.ImageRegistry(spec.Image) {
		return a.Credential
	}
	return ""
}

// pull pulls the pod's image, with its registry credential (credentialOf),
// and records which credential pulled it. The error is the engine's
// reason, "pulling IMAGE: ...": what the workload's status says.
func (r *Runner) pull(ctx context.Context, spec runner.Spec) error {
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	opts := client.ImagePullOptions{}
	cred := credentialOf(spec)
	if cred != "" {
		a := spec.Registry
		b, err := json.Marshal(registry.AuthConfig{Username: a.Username, Password: a.Password, ServerAddress: a.Server})
		if err != nil {
			return fmt.Errorf("pulling %s: %w", spec.Image, err)
		}
		opts.RegistryAuth = base64.URLEncoding.EncodeToString(b)
	}
	resp, err := r.cli.ImagePull(ctx, spec.Image, opts)
	if err == nil {
		defer resp.Close()
		err = resp.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("pulling %s: %s", spec.Image, pullReason(err, spec.Registry))
	}
	if err := r.recordPull(spec.Image, cred); err != nil {
		return fmt.Errorf("pulling %s: %w", spec.Image, err)
	}
	return nil
}

// pullReason is the engine's error, with the password cut out should the
// engine ever echo it.
func pullReason(err error, a *runner.RegistryAuth) string {
	msg := err.Error()
	if a != nil && a.Password != "" {
		msg = strings.ReplaceAll(msg, a.Password, "[redacted]")
	}
	return msg
}

// pulledDir holds, per image the runner pulled with a credential, that
// credential's name (a file named after the reference's hash); its leading
// dot keeps it from every pod id (validID).
const pulledDir = ".pulled-with"

func (r *Runner) pulledPath(image string) string {
	h := sha256.Sum256([]byte(image))
	return filepath.Join(r.cfg.DataDir, pulledDir, hex.EncodeToString(h[:]))
}

// pulledWith is the credential that last pulled image here ("" for none,
// or an image pulled without one: public).
func (r *Runner) pulledWith(image string) string {
	b, err := os.ReadFile(r.pulledPath(image))
	if err != nil {
		return ""
	}
	return string(b)
}

// recordPull keeps which credential pulled image ("": none, so the image
// is anyone's).
func (r *Runner) recordPull(image, cred string) error {
	p := r.pulledPath(image)
	if cred == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(cred), 0o600)
}
