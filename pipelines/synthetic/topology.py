"""The fleet's hardware and where it sits: regions > zones > spines > racks > nodes.

Nodes come in four pools (online services and big data on CPU SKUs, AI training on
8-GPU NVLink SKUs of several GPU models, inference on 8-GPU PCIe SKUs). Racks hold one
SKU; a few racks installed together form an install *lot* (the unit of the lot
frailty in :mod:`pipelines.synthetic.failures`). All node attributes are numpy arrays
indexed by node number, so later stages stay vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from predops.core.schemas import INVENTORY
from predops.pipelines.synthetic.calibration import TRAINING_MODEL_SHARE

POOLS: tuple[str, ...] = ("online", "bigdata", "training", "inference")
# choice: half CPU, half GPU nodes (openb, a GPU cluster, has 20 % CPU nodes; a mixed
# platform running online services and big data has many more).
POOL_NODE_SHARE: dict[str, float] = {
    "online": 0.30,
    "bigdata": 0.20,
    "training": 0.30,
    "inference": 0.20,
}
RACKS_PER_SPINE = 16
RACKS_PER_LOT = 4
MAX_AGE_DAYS = 4 * 365.0
MIN_AGE_DAYS = 30.0


@dataclass(frozen=True, slots=True)
class Sku:
    """A hardware SKU. Power in watts per GPU; memory in MiB; CPU in milli-cores."""

    name: str
    pool: str
    gpu_model: str | None
    gpus: int
    cpu_milli: int
    memory_mib: int
    numa_nodes: int
    nvlink: bool
    nodes_per_rack: int
    gpu_idle_w: float = 0.0
    gpu_tdp_w: float = 0.0
    gpu_temp_offset_c: float = 0.0


# Node shapes follow the Alibaba openb / v2026 inventories (96-192 cores per GPU node,
# 8 GPUs on the training SKUs); power from the GPU vendors' data sheets.
SKUS: tuple[Sku, ...] = (
    Sku("cpu-std-96c", "online", None, 0, 96_000, 384 * 1024, 2, False, 32),
    Sku("cpu-mem-128c", "bigdata", None, 0, 128_000, 1024 * 1024, 2, False, 24),
    Sku(
        "gpu-a100-8x",
        "training",
        "A100-SXM4-80GB",
        8,
        128_000,
        1024 * 1024,
        2,
        True,
        4,
        60.0,
        400.0,
        0.0,
    ),
    Sku("gpu-h800-8x", "training", "H800", 8, 192_000, 2048 * 1024, 2, True, 4, 90.0, 700.0, 4.0),
    Sku(
        "gpu-a800-8x",
        "training",
        "A800-SXM4-80GB",
        8,
        128_000,
        1024 * 1024,
        2,
        True,
        4,
        60.0,
        400.0,
        0.0,
    ),
    Sku("gpu-a10-8x", "inference", "A10", 8, 128_000, 1024 * 1024, 2, False, 8, 25.0, 150.0, -3.0),
)
SKU_INDEX = {s.name: i for i, s in enumerate(SKUS)}
_TRAINING_SKU = {
    "A100-SXM4-80GB": "gpu-a100-8x",
    "H800": "gpu-h800-8x",
    "A800-SXM4-80GB": "gpu-a800-8x",
}


def _apportion(total: int, shares: dict[str, float], *, at_least_one: bool) -> dict[str, int]:
    """Split ``total`` by ``shares`` (largest remainder); optionally >= 1 each."""
    keys = list(shares)
    w = np.array([shares[k] for k in keys], dtype=float)
    w = w / w.sum()
    raw = w * total
    counts = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - counts), kind="stable")[: total - counts.sum()]:
        counts[i] += 1
    if at_least_one and total >= len(keys):
        while (counts == 0).any():
            counts[np.argmax(counts)] -= 1
            counts[np.argmin(counts)] += 1
    return dict(zip(keys, counts.tolist(), strict=True))


@dataclass(frozen=True, slots=True)
class Fleet:
    """Static node attributes, one array entry per node (index = node number)."""

    node_id: list[str]
    sku: np.ndarray  # int index into SKUS
    pool: np.ndarray  # int index into POOLS
    rack: np.ndarray  # int rack number
    lot: np.ndarray  # int install-lot number
    age_days: np.ndarray  # float, node age at the simulation start
    rack_names: list[str]
    rack_zone: list[str]
    rack_spine: list[str]
    rack_region: list[str]

    @property
    def n(self) -> int:
        return len(self.node_id)

    @property
    def n_racks(self) -> int:
        return len(self.rack_names)

    def attr(self, name: str) -> np.ndarray:
        """A per-node array of a SKU attribute (``gpus``, ``cpu_milli``, ``gpu_tdp_w``...)."""
        values = np.array([getattr(s, name) for s in SKUS])
        out: np.ndarray = values[self.sku]
        return out

    @property
    def is_gpu(self) -> np.ndarray:
        return self.attr("gpus") > 0

    def gpu_model(self) -> list[str | None]:
        return [SKUS[i].gpu_model for i in self.sku]

    def inventory(self, at: datetime) -> pl.DataFrame:
        """The INVENTORY snapshot of every node at ``at`` (the simulation start)."""
        skus = [SKUS[i] for i in self.sku]
        installed = [at - timedelta(days=float(np.floor(a))) for a in self.age_days]
        frame = pl.DataFrame(
            {
                "ts": [at] * self.n,
                "node_id": self.node_id,
                "pool": [POOLS[p] for p in self.pool],
                "sku": [s.name for s in skus],
                "gpu_model": [s.gpu_model for s in skus],
                "gpus": [s.gpus for s in skus],
                "cpu_milli": [s.cpu_milli for s in skus],
                "memory_mib": [s.memory_mib for s in skus],
                "numa_nodes": [s.numa_nodes for s in skus],
                # One NVSwitch board per HGX node: its 8 GPUs form one NVLink domain.
                "nvlink_domain": [
                    f"nvl-{nid}" if s.nvlink else None
                    for nid, s in zip(self.node_id, skus, strict=True)
                ],
                "region": [self.rack_region[r] for r in self.rack],
                "zone": [self.rack_zone[r] for r in self.rack],
                "spine": [self.rack_spine[r] for r in self.rack],
                "rack": [self.rack_names[r] for r in self.rack],
                "installed_at": installed,
            },
            schema_overrides={
                "ts": pl.Datetime("us", "UTC"),
                "installed_at": pl.Datetime("us", "UTC"),
            },
        )
        return frame.cast(INVENTORY.polars_schema())


def _layout(n: int) -> tuple[int, int]:
    """(regions, zones per region) for a fleet of ``n`` nodes."""
    regions = 1 if n < 3000 else (2 if n < 20000 else 3)
    zones = 2 if n < 1000 else 3
    return regions, zones


def build_fleet(n: int, rng: np.random.Generator) -> Fleet:
    """Lay out ``n`` nodes: pools by POOL_NODE_SHARE, training GPU models by the
    calibrated model mix, racks of one SKU spread round-robin over zones."""
    if n < 1:
        raise ValueError(f"a fleet needs at least one node, got {n}")
    per_pool = _apportion(n, POOL_NODE_SHARE, at_least_one=True)
    sku_counts: list[tuple[str, int]] = [
        ("cpu-std-96c", per_pool["online"]),
        ("cpu-mem-128c", per_pool["bigdata"]),
    ]
    for model, k in _apportion(
        per_pool["training"], TRAINING_MODEL_SHARE, at_least_one=False
    ).items():
        sku_counts.append((_TRAINING_SKU[model], k))
    sku_counts.append(("gpu-a10-8x", per_pool["inference"]))

    regions, zones_per_region = _layout(n)
    zone_names = [
        f"rg-{r + 1}{chr(ord('a') + z)}" for r in range(regions) for z in range(zones_per_region)
    ]
    sku_of_node: list[int] = []
    rack_of_node: list[int] = []
    rack_names: list[str] = []
    rack_zone: list[str] = []
    rack_spine: list[str] = []
    rack_region: list[str] = []
    racks_in_zone = dict.fromkeys(zone_names, 0)
    zone_cursor = 0
    for sku_name, count in sku_counts:
        sku = SKUS[SKU_INDEX[sku_name]]
        for first in range(0, count, sku.nodes_per_rack):
            zone = zone_names[zone_cursor % len(zone_names)]
            zone_cursor += 1
            k = racks_in_zone[zone]
            racks_in_zone[zone] += 1
            spine = f"{zone}-sp{k // RACKS_PER_SPINE + 1:02d}"
            rack_names.append(f"{spine}-rk{k % RACKS_PER_SPINE + 1:02d}")
            rack_zone.append(zone)
            rack_spine.append(spine)
            rack_region.append(zone[:-1])
            size = min(sku.nodes_per_rack, count - first)
            sku_of_node += [SKU_INDEX[sku_name]] * size
            rack_of_node += [len(rack_names) - 1] * size
    sku_arr = np.array(sku_of_node, dtype=np.int16)
    rack_arr = np.array(rack_of_node, dtype=np.int32)
    lot_of_rack = np.arange(len(rack_names)) // RACKS_PER_LOT
    n_lots = int(lot_of_rack.max()) + 1
    lot_age = rng.uniform(MIN_AGE_DAYS, MAX_AGE_DAYS, size=n_lots)
    width = max(5, len(str(n)))
    pool_index = {p: i for i, p in enumerate(POOLS)}
    return Fleet(
        node_id=[f"node-{i:0{width}d}" for i in range(n)],
        sku=sku_arr,
        pool=np.array([pool_index[SKUS[s].pool] for s in sku_arr], dtype=np.int8),
        rack=rack_arr,
        lot=lot_of_rack[rack_arr],
        age_days=lot_age[lot_of_rack[rack_arr]],
        rack_names=rack_names,
        rack_zone=rack_zone,
        rack_spine=rack_spine,
        rack_region=rack_region,
    )
