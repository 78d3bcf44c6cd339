package sealing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const header = "# Runway credentials keys: one \"ID BASE64\" a line, oldest first; values are sealed under the last.\n"

// Create writes a new key file at path (mode 0600) holding one key, unless
// a file is there already; it says whether it wrote one.
func Create(path string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	line, _, err := newKeyLine(nil)
	if err != nil {
		return false, err
	}
	return true, write(path, header+line)
}

// AddKey appends a new key to the key file at path, which becomes the one
// values are sealed under; it returns its id.
func AddKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	keys, err := parse(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	line, id, err := newKeyLine(keys)
	if err != nil {
		return "", err
	}
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return id, write(path, s+line)
}

// PruneKeys removes every key but the newest from the key file at path and
// returns the ids removed. Run it once ReencryptCredentials has sealed
// every value under the newest key: a value under a removed key no longer
// opens.
func PruneKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	newest := keys[len(keys)-1].id
	var kept []string
	var removed []string
	for _, line := range strings.Split(string(b), "\n") {
		id, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case id == newest || strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "":
			kept = append(kept, line)
		default:
			removed = append(removed, id)
		}
	}
	return removed, write(path, strings.Join(kept, "\n"))
}

// newKeyLine is a fresh random key's line, with an id from the time that
// none of keys has.
func newKeyLine(keys []key) (line, id string, err error) {
	raw := make([]byte, keySize)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	base := "k" + time.Now().UTC().Format("20060102t150405")
	id = base
	for n := 2; taken(keys, id); n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	return id + " " + base64.StdEncoding.EncodeToString(raw) + "\n", id, nil
}

func taken(keys []key, id string) bool {
	for _, k := range keys {
		if k.id == id {
			return true
		}
	}
	return false
}

// write replaces path's content through a temporary file in its directory
// (mode 0600), so a reader sees the old file or the new one.
func write(path, content string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".keys-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
