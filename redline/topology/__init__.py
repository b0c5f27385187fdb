"""Server topologies under the upstream names: standalone, io-threads, N-primary cluster,
primary + replicas; and the CPU pinning plan for their processes and the client.

    spec = parse_topology("oss-cluster-3-primaries")
    plan = plan_cpus(spec, available_cpus())
    deployment = deploy(spec, binary=path, config=suite_config, cpu_plan=plan, progress=print)
    ...                                  # load with --cluster-mode when deployment.cluster_mode
    deployment.stop()
"""

from redline.topology.cpus import CpuPlan, plan_cpus
from redline.topology.deployment import Deployment, attach_replicas_now, deploy, wait_replicas_in_sync
from redline.topology.spec import DEFAULT_TOPOLOGY, TopologySpec, parse_topology

__all__ = ["DEFAULT_TOPOLOGY", "CpuPlan", "Deployment", "TopologySpec", "attach_replicas_now", "deploy", "parse_topology",
           "plan_cpus", "wait_replicas_in_sync"]
