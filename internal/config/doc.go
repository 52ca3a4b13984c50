// Package config turns evictd's command line, an optional KubeletConfiguration
// file (--config) and an optional OpenShift node-config.yaml (--node-config)
// into one validated Config, with the kubelet's flag names, syntax and
// defaults. Flags given on the command line win over --config, which wins over
// --node-config.
package config
