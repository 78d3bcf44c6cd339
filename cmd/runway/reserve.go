package main

import (
	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/cmd/runway/server"
)

func reserveGPUCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reserve-gpu",
		Short: "Hold a GPU for the fractions on it (the Kubernetes runtime's reservation pods run this)",
		Long: `Run as the container of a GPU reservation pod, which the Kubernetes runtime
creates for each GPU that holds fractions (requesting nvidia.com/gpu: 1): it
writes the UUID the device plugin gave it (NVIDIA_VISIBLE_DEVICES) on its own
pod (POD_NAMESPACE, POD_NAME) as runway.io/gpu-uuid, so that the fractions'
pods get that GPU, then holds it until SIGINT or SIGTERM. It uses the
in-cluster config; its service account needs to patch its own pod.`,
		Example: `  POD_NAMESPACE=runway POD_NAME=gpu-node-1-0-1a2b3c4d NVIDIA_VISIBLE_DEVICES=GPU-6e3f... runway reserve-gpu`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := untilSignal(cmd.Context())
			defer stop()
			return server.ReserveGPU(ctx)
		},
	}
}
