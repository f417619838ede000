"""Reasons read like an SRE would write them, with units, signs and the right feature."""

from __future__ import annotations

import numpy as np

from predops.features.definitions import node_feature_set
from predops.models.failure.reasons import defs_by_name, describe, top_reasons, top_reasons_rows

DEFS = defs_by_name(node_feature_set().defs)


def test_feature_sentences_carry_units_and_direction() -> None:
    assert (
        describe(DEFS["gpu_temp_c__mean_1h__rack_dev"], 9.14)
        == "gpu_temp_c 9.1 C above rack peers over 1h"
    )
    assert describe(DEFS["ecc_sbe__increase_6h"], 12.0) == (
        "12 new GPU single-bit ECC errors in the last 6h"
    )
    assert describe(DEFS["gpu_temp_c__slope_6h"], -0.5) == "gpu_temp_c falling 0.5 C/h over 6h"
    assert describe(DEFS["mem_used_bytes__mean_1h"], 3 * 2**30) == (
        "mem_used_bytes averaged 3 GiB over 1h"
    )
    assert describe(DEFS["samples__missing_frac_6h"], 0.25) == (
        "25 % of expected samples missing over 6h"
    )
    assert describe(DEFS["events__hours_since_failure"], 30.0) == "last failure 30 h ago"
    assert describe(DEFS["node__sku"], "gpu-h800-8x") == "sku gpu-h800-8x"
    assert describe(DEFS["gpu_temp_c__z_own_24h"], float("nan")).endswith("unknown (no data)")


def test_top_reasons_are_the_largest_contributions_with_their_sign() -> None:
    names = ["ecc_sbe__increase_6h", "gpu_temp_c__mean_1h__rack_dev", "node__age_days"]
    defs = [DEFS[n] for n in names]
    reasons = top_reasons(np.array([0.8, -1.2, 0.01]), [14.0, -6.0, 400.0], defs, top=3)
    assert [r.feature for r in reasons] == [names[1], names[0]]  # 0.01 is noise
    assert reasons[0].contribution == -1.2
    assert reasons[0].text == "gpu_temp_c 6 C below rack peers over 1h (lowers risk)"
    assert reasons[1].text.endswith("(raises risk)")


def test_drive_sentences_name_the_smart_attribute() -> None:
    from predops.models.failure.drives import drive_feature_defs

    defs = defs_by_name(drive_feature_defs((5, 187, 197, 198)))
    assert describe(defs["smart_5_raw__increase_1d"], 8.0) == (
        "SMART 5 reallocated sectors grew by 8 in 1 day"
    )
    assert describe(defs["smart_197_raw__days_since_increase"], 3.0) == (
        "SMART 197 pending sectors last grew 3 days ago"
    )
    assert describe(defs["smart_187_raw__days_since_nonzero"], 40.0) == (
        "SMART 187 reported uncorrectable errors nonzero for 40 days"
    )
    assert (
        describe(defs["drive__days_since_growth"], 2.0) == "any SMART counter last grew 2 days ago"
    )
    assert describe(defs["smart_rule__nonzero"], 2.0) == "2 of SMART 5/187/197/198 nonzero"
    assert describe(defs["drive__days_since_snapshot"], 9.0) == "last SMART snapshot 9 days ago"


def test_reasons_of_many_rows_at_once_are_those_of_each_row() -> None:
    defs = list(node_feature_set().defs)[:12]
    rng = np.random.default_rng(4)
    contrib = rng.normal(0, 0.3, size=(50, len(defs)))
    contrib[7] = 0.01  # all below the noise floor: no reason
    contrib[9] = 0.0
    contrib[9, :4] = 0.5  # ties: the first feature of the tie first
    values = rng.uniform(0, 100, size=(50, len(defs))).astype(object)
    many = top_reasons_rows(contrib, values, defs, top=3)
    assert many == [top_reasons(contrib[k], list(values[k]), defs, top=3) for k in range(50)]
    assert many[7] == () and [r.feature for r in many[9]] == [d.name for d in defs[:3]]
