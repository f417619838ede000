"""Stand-ins for external systems that cannot run on the test machines (a kube-apiserver,
a flaky Prometheus) and exporters that turn contract frames into what the real exporters
would have exposed."""
