// Package gitclone clones a git data source's repository for a pod, with
// the node's own `git`, before the pod starts (the node agent's step; the
// runtime then binds the directory at the data source's mount path).
//
// What it holds to, since the repository URL and revision come from a
// tenant: only http and https transports (GIT_ALLOW_PROTOCOL: no file://,
// ext:: or local paths reaching the node's own repositories), no
// submodules, no system or global git configuration of the node, an
// empty HOME of its own, no prompt; the revision is never taken for an option (it is checked by
// the workload service and passed after the options). A token reaches git
// as an HTTP header through GIT_CONFIG_* environment variables (read by git
// only, never in its argv, where `ps` shows it, nor on disk), scoped to the
// repository's URL; git's error output, which goes into the pod's reason,
// holds the URL but never a header.
//
// Not held to: the clone's size and the hosts it reaches. A tenant may
// clone a large repository onto the node's disk (bounded by Timeout only)
// and may name any http(s) host the node reaches (the node's network, not
// the pod's).
package gitclone

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Timeout bounds one clone.
const Timeout = 10 * time.Minute

// Auth is how a clone authenticates: HTTP basic with a token as the
// password.
type Auth struct {
	Username, Token string
}

// Clone clones repo into dir (absent or empty) and checks out revision
// (a branch, a tag or a commit; "" for the default branch) detached; it
// returns the commit checked out.
func Clone(ctx context.Context, dir, repo, revision string, auth *Auth) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// HOME is a directory of its own, empty: nothing a tenant wrote into a
	// shared one (a .netrc, git's attributes) reaches the clone.
	home, err := os.MkdirTemp("", "runway-git-home-")
	if err != nil {
		return "", fmt.Errorf("clone %s: %w", repo, err)
	}
	defer os.RemoveAll(home)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=",
		"GIT_ALLOW_PROTOCOL=http:https", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}
	if auth != nil && auth.Token != "" {
		user := auth.Username
		if user == "" {
			user = "git"
		}
		header := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+auth.Token))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http."+repo+".extraHeader", "GIT_CONFIG_VALUE_0="+header)
	}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(errOut.String())
			if len(msg) > 512 {
				msg = msg[len(msg)-512:]
			}
			if ctx.Err() != nil {
				msg = "timed out after " + Timeout.String()
			}
			if msg == "" {
				msg = err.Error()
			}
			return "", errors.New(msg)
		}
		return strings.TrimSpace(out.String()), nil
	}
	if _, err := git("clone", "--quiet", "--no-checkout", "--no-recurse-submodules", "--", repo, dir); err != nil {
		return "", fmt.Errorf("clone %s: %w", repo, err)
	}
	sha := ""
	if revision == "" {
		s, err := git("-C", dir, "rev-parse", "--verify", "HEAD^{commit}")
		if err != nil {
			return "", fmt.Errorf("clone %s: the default branch: %w", repo, err)
		}
		sha = s
	} else {
		// A branch is the remote's (origin/BRANCH); a tag or a commit is
		// itself.
		for _, ref := range []string{"refs/remotes/origin/" + revision, "refs/tags/" + revision, revision} {
			if s, err := git("-C", dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}"); err == nil && s != "" {
				sha = s
				break
			}
		}
		if sha == "" {
			return "", fmt.Errorf("clone %s: it has no branch, tag or commit %q", repo, revision)
		}
	}
	if _, err := git("-C", dir, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha); err != nil {
		return "", fmt.Errorf("clone %s: check out %s: %w", repo, sha, err)
	}
	return sha, nil
}
