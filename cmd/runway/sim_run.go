package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/pkg/scenario"
)

func simCommand() *cobra.Command {
	sim := &cobra.Command{
		Use:   "sim",
		Short: "Play scheduling scenarios through the real scheduler on a virtual clock",
	}
	sim.AddCommand(&cobra.Command{
		Use:   "run FILE",
		Short: "Play a scenario file and print the result as JSON",
		Long: `Play a scenario (see scenarios/FORMAT.md) through Runway's scheduler on a
virtual clock and print the result as JSON on stdout: the same bytes for the same file.

Exit codes: 0 every expectation held; 1 an expectation failed (each one on stderr);
2 the file is malformed (file, line and what is wrong on stderr).`,
		Example: `  runway sim run scenarios/seed-quickstart.yaml
  runway sim run scenario.yaml | jq .metrics`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return simRun(cmd, args[0])
		},
	})
	return sim
}

func simRun(cmd *cobra.Command, path string) error {
	sc, err := scenario.Load(path)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	res, err := scenario.Run(sc, scenario.Options{Progress: cmd.ErrOrStderr()})
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res.Output); err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if _, err := os.Stdout.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	if len(res.Failures) > 0 {
		for _, f := range res.Failures {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s:%d: expectation failed: %s\n", path, f.Line, f.Msg)
		}
		// An expect block is one expectation, however many of its checks
		// failed (each is listed above).
		e := res.Output.Expectations
		return &exitError{code: 1, msg: fmt.Sprintf("%s: %d of %d expectations failed (%d failed checks)", path,
			e.Failed, e.Passed+e.Failed, len(res.Failures))}
	}
	return nil
}
