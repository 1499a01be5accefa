#!/usr/bin/env python3
"""Writes the *.py.golden files: what dataclasses_json's to_json() writes for each case.

to_json() is json.dumps(<fields as a dict in declaration order>) with json.dumps's
defaults, so this script needs only the standard library. Run it from this folder:
    python3 gen_golden.py
The spec's own examples (*.spec.golden) are copied from the spec text by hand.
"""
import json

nan, inf = float("nan"), float("inf")


def model_meta(model_name=None, model_dir=None, ckpt=None, num_shard=-1, action="NONE", spec_replicas=()):
    return dict(model_name=model_name, model_dir=model_dir, ckpt=ckpt, num_shard=num_shard,
                action=action, spec_replicas=list(spec_replicas))


def resource_spec(address=None, shard_id=None, replica_id=None, memory=None, cpu=-1.0, network=-1.0, work_load=-1.0):
    return dict(address=address, shard_id=shard_id, replica_id=replica_id, memory=memory, cpu=cpu,
                network=network, work_load=work_load)


def publish_meta(shard_id=None, replica_id=-1, model_name=None, num_ps=None, total_publish_num=1,
                 sub_models=None, ptype=1, is_spec=False):
    return dict(shard_id=shard_id, replica_id=replica_id, model_name=model_name, num_ps=num_ps,
                total_publish_num=total_publish_num, sub_models=sub_models, ptype=ptype, is_spec=is_spec)


def replica_meta(address=None, address_ipv6=None, stat=0, model_name=None, server_type=None, task=-1,
                 replica=-1, archon_address=None, archon_address_ipv6=None):
    return dict(address=address, address_ipv6=address_ipv6, stat=stat, model_name=model_name,
                server_type=server_type, task=task, replica=replica, archon_address=archon_address,
                archon_address_ipv6=archon_address_ipv6)


def deploy_config(model_base_path=None, version_policy=None):
    return dict(model_base_path=model_base_path, version_policy=version_policy)


def service_info(grpc=None, http=None, archon=None, agent=None, idc=None, debug_info=None):
    return dict(grpc=grpc, http=http, archon=archon, agent=agent, idc=idc, debug_info=debug_info)


CASES = {
    "model_meta_default": model_meta(),
    "model_meta_unicode": model_meta(model_name="模型😀é", model_dir="/tmp/<a&b>/\"q\"\\\t\n\x7f\x01", ckpt="",
                                     num_shard=0, action="LOAD", spec_replicas=[1, 2, 3]),
    "resource_spec_default": resource_spec(),
    "resource_spec_floats": resource_spec(address="[::1]:80", shard_id=0, replica_id=-1, memory=2**63 - 1,
                                          cpu=1e-07, network=1e16, work_load=0.1),
    "resource_spec_floats2": resource_spec(memory=-2**63, cpu=1.0, network=123456789.125, work_load=-0.0),
    "resource_spec_floats3": resource_spec(cpu=1e22, network=5e-324, work_load=1.7976931348623157e308),
    "resource_spec_floats4": resource_spec(cpu=0.0001, network=1e-05, work_load=9999999999999998.0),
    "resource_spec_nonfinite": resource_spec(cpu=nan, network=inf, work_load=-inf),
    "publish_meta_default": publish_meta(),
    "publish_meta_unload": publish_meta(shard_id=0, replica_id=3, model_name="m", num_ps=0,
                                        total_publish_num=0, sub_models={}, ptype=2, is_spec=True),
    "replica_meta_default": replica_meta(),
    "replica_meta_registered": replica_meta(address="10.0.0.1:8500", address_ipv6="[fdbd::1]:8500",
                                            archon_address="10.0.0.1:8600", archon_address_ipv6="[fdbd::1]:8600"),
    "replica_meta_v2": replica_meta(address="localhost:123", stat=30, model_name="monolith", server_type="ps",
                                    task=0, replica=0),
    "deploy_config_default": deploy_config(),
    "deploy_config_latest": deploy_config("hdfs:///x/exported_models/entry", "latest"),
    "service_info_default": service_info(),
    "service_info_v3": service_info(
        grpc="10.0.0.1:8500", http="10.0.0.1:8501", archon="10.0.0.1:8502", agent="10.0.0.1:8503", idc="lf",
        debug_info=json.dumps({"layout_path": "/test/layouts/default",
                               "layout_filters": [r"entry;None", r"ps_(?P<i>\d+);i % 2 == 0"]})),
}

for name, d in CASES.items():
    with open(name + ".py.golden", "w", encoding="utf-8") as f:
        f.write(json.dumps(d))

# floats.py.golden: "<IEEE-754 bits in hex> <json.dumps text>" per line, for the float writer.
import random
import struct

rng = random.Random(20261122)
vals = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-07, 1e-05, 0.0001, 1e15, 1e16, 1e17, 1e22, 1e-320, 5e-324,
        1.7976931348623157e308, 2.2250738585072014e-308, 123456789.125, 9999999999999998.0, 3.5,
        1234567890123456.7, 0.30000000000000004, nan, inf, -inf]
for _ in range(300):
    vals.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
for _ in range(300):
    vals.append(rng.uniform(-1, 1) * 10 ** rng.randint(-8, 20))
with open("floats.py.golden", "w", encoding="utf-8") as f:
    for v in vals:
        if v != v:
            v = nan  # one canonical NaN
        f.write("%016x %s\n" % (struct.unpack("<Q", struct.pack("<d", v))[0], json.dumps(v)))
