// Package config turns evictd's command line, its configuration file
// (--config, an AgentConfiguration of config.evictd.io/v1alpha1, with its
// --config-dir drop-ins) and the files it imports (a KubeletConfiguration,
// --import-kubelet-config; an OpenShift node-config.yaml, --node-config)
// into one validated Config, with the kubelet's flag names, syntax and
// defaults, and says where each setting came from (Config.Provenance).
// Flags given on the command line win over the drop-ins, which win over
// --config, which wins over --import-kubelet-config, which wins over
// --node-config.
package config
