package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// Environment variables that FromEnvironment reads.
const (
	EnvServer = "RUNWAY_SERVER"  // address of a Runway server, "host:port" or "https://host:port"
	EnvToken  = "RUNWAY_TOKEN"   // bearer token sent with every call
	EnvConfig = "RUNWAY_CONFIG"  // path of the config file, instead of the default
	EnvCAFile = "RUNWAY_CA_FILE" // PEM file of the CAs an https:// server's certificate is checked against
	// EnvInsecure=1 allows a plaintext server (no https://) that is not
	// loopback: Config.Insecure.
	EnvInsecure = "RUNWAY_INSECURE"
)

// Config says where the server is and who is calling.
type Config struct {
	// Server is "host:port" (plaintext, as `runway dev` serves) or
	// "https://host[:port]" (TLS with the system's roots, or CAFile's).
	// A plaintext server (no scheme, or http://) must be loopback unless
	// Insecure is set.
	Server string `json:"server,omitempty"`
	// Insecure allows a plaintext server that is not loopback: the token
	// and every answer cross the network in the clear.
	Insecure bool `json:"insecure,omitempty"`
	// CAFile, for an https:// server, is a PEM file of the CAs its
	// certificate must chain to instead of the system's.
	CAFile string `json:"caFile,omitempty"`
	// Token is sent as "authorization: Bearer TOKEN"; empty sends none.
	Token string `json:"token,omitempty"`
	// RefreshToken and Expiry come with a token from a sign-in: Refreshed
	// trades the refresh token for a new token shortly before Expiry.
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

// ConfigPath is the config file: $RUNWAY_CONFIG, or runway/config.json in
// the user's config directory (~/.config on Linux).
func ConfigPath() (string, error) {
	if p := os.Getenv(EnvConfig); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(dir, "runway", "config.json"), nil
}

// LoadConfig reads the config file; a missing file is an empty Config.
func LoadConfig() (Config, error) {
	var c Config
	p, err := ConfigPath()
	if err != nil {
		return c, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read %s: %w", p, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read %s: %w", p, err)
	}
	return c, nil
}

// SaveConfig writes c to the config file, readable by the user only (it
// holds a token).
func SaveConfig(c Config) error {
	p, err := ConfigPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the config: %w", err)
	}
	return nil
}

// FromEnvironment is the config file overridden field by field by
// RUNWAY_SERVER and RUNWAY_TOKEN. An unreadable config file is ignored
// here; Dial reports a missing server.
func FromEnvironment() Config {
	c, _ := LoadConfig()
	if s := os.Getenv(EnvServer); s != "" {
		c.Server = s
	}
	if f := os.Getenv(EnvCAFile); f != "" {
		c.CAFile = f
	}
	if os.Getenv(EnvInsecure) == "1" {
		c.Insecure = true
	}
	if t := os.Getenv(EnvToken); t != "" {
		// The file's refresh token belongs to the file's token.
		c.Token, c.RefreshToken, c.Expiry = t, "", time.Time{}
	}
	return c
}

// refreshBefore is how long before its expiry a token is refreshed.
const refreshBefore = time.Minute

// Refreshed returns cfg with a new token when its token expires within a
// minute and it has a refresh token (the LoginResponse's), and whether it
// changed; save it then. A refresh the server refuses (the principal was
// deleted, its password or secret changed) is an Unauthenticated error:
// sign in again.
func Refreshed(ctx context.Context, cfg Config) (Config, bool, error) {
	if cfg.RefreshToken == "" || cfg.Expiry.IsZero() || time.Until(cfg.Expiry) > refreshBefore {
		return cfg, false, nil
	}
	c, err := Dial(ctx, Config{Server: cfg.Server, CAFile: cfg.CAFile, Insecure: cfg.Insecure})
	if err != nil {
		return cfg, false, err
	}
	defer c.Close()
	r, err := c.IdentityService.Login(ctx, &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_RefreshToken{RefreshToken: cfg.RefreshToken}})
	if err != nil {
		return cfg, false, err
	}
	out := SignedIn(cfg.Server, r)
	out.CAFile, out.Insecure = cfg.CAFile, cfg.Insecure
	return out, true, nil
}

// SignedIn is the config of a sign-in's response.
func SignedIn(server string, r *identityv1.LoginResponse) Config {
	return Config{Server: server, Token: r.GetAccessToken(), RefreshToken: r.GetRefreshToken(), Expiry: r.GetExpireTime().AsTime()}
}
