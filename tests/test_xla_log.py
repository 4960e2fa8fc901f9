"""hlofuse.xla_log: reading XLA's `*.priority_fusion_dump.txt` and asking it about pairs."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest

from hlofuse import loads, xla_log
from hlofuse.errors import InputError

REPO = Path(__file__).resolve().parent.parent

# A log as XLA writes it (shortened from a jaxlib 0.10.2 compile of `f(p) = (c*c, bitcast(c))`,
# c = f32(p+p)), with the escapes protobuf text uses in the module string.
LOG = r'''fusion_steps {
  update_priority {
    producer_name: "convert_element_type.1.0"
    consumer_names: "mul.1.0"
    consumer_names: "bitcast.1"
    us_fused: 2.01175
    us_unfused: 3.028
  }
}
fusion_steps {
  producer_ineligible {
    producer_name: "mul.1.0"
    reason: "the consumer is not fusible"
  }
}
fusion_steps {
  fusion {
    fusion_name: "fusion"
    producer_name: "convert_element_type.1.0"
    consumer_name: "mul.1.0"
  }
}
fusion_steps {
  update_priority {
    producer_name: "add.1.0"
    consumer_names: "convert_element_type.1.0"
    consumer_names: "fusion"
    us_fused: 1
    us_unfused: 1
  }
}
fusion_steps {
  fusion {
    fusion_name: "fusion.1"
    producer_name: "add.1.0"
    consumer_name: "convert_element_type.1.0"
  }
}
fusion_steps {
  fusion {
    fusion_name: "fusion"
    producer_name: "add.1.0"
    consumer_name: "fusion"
  }
}
fusion_steps {
  producer_ineligible {
    producer_name: "fusion.1"
    reason: "not fusing because there are only bitcast users"
  }
}
fusion_steps {
  update_priority {
    producer_name: "slow"
    consumer_names: "x"
    us_fused: 5.5
    us_unfused: 4.25
  }
}
gpu_device_info {
  core_count: 84
  clock_rate_ghz: 1.8
  cuda_compute_capability {
    major: 8
    minor: 6
  }
  name: "NVIDIA RTX A6000"
}
hlo_module_before_fusion: "HloModule m\n\nENTRY main.1 {\n  p.1 = f16[512]{0} parameter(0)\n  ROOT a = f16[512]{0} add(p.1, p.1), metadata={op_name=\"a\\\\b\"}\n}\n\n"
'''


def test_steps_device_and_module_are_read():
    log = xla_log.parse(LOG)
    assert [type(s).__name__ for s in log.steps] == [
        "UpdatePriority", "ProducerIneligible", "FusionStep", "UpdatePriority", "FusionStep", "FusionStep",
        "ProducerIneligible", "UpdatePriority"]
    first = log.priorities[0]
    assert first.consumers == ("mul.1.0", "bitcast.1")
    assert first.us_fused == pytest.approx(2.01175) and first.us_unfused == pytest.approx(3.028)
    assert first.priority_us == pytest.approx(1.01625)
    assert log.device_info["core_count"] == 84
    assert log.device_info["cuda_compute_capability"] == {"major": 8, "minor": 6}
    assert log.device_info["name"] == "NVIDIA RTX A6000"
    assert log.reasons() == {"the consumer is not fusible": 1, "not fusing because there are only bitcast users": 1}
    module = loads(log.module_before_fusion)
    assert module.entry.root.name == "a"
    assert 'op_name="a\\\\b"' in log.module_before_fusion  # escapes decoded once, as XLA wrote them


def test_members_follow_fusions_across_renames():
    log = xla_log.parse(LOG)
    assert log.members("fusion") == {"convert_element_type.1.0", "mul.1.0", "add.1.0"}
    assert log.members("fusion.1") == {"add.1.0", "convert_element_type.1.0"}
    assert log.members("p.1") == {"p.1"}


def test_verdicts():
    log = xla_log.parse(LOG)
    fused = log.verdict("convert_element_type.1.0", "mul.1.0")
    assert fused.status == "fused"
    # the producer as the log knew it after the renames: fusion.1 holds add and convert
    refused = log.verdict({"add.1.0", "convert_element_type.1.0"}, {"bitcast.1"})
    assert refused.status == "ineligible" and refused.producer == "fusion.1"
    assert refused.reason == "not fusing because there are only bitcast users"
    slow = log.verdict("slow", "x")
    assert slow.status == "unprofitable" and slow.us_fused == 5.5 and slow.us_unfused == 4.25
    assert log.reason("slow", "x") is not None
    assert log.verdict("never-mentioned", "x") is None


def test_unreadable_text_is_an_input_error():
    with pytest.raises(InputError):
        xla_log.parse("fusion_steps { update_priority { producer_name: ")
    with pytest.raises(InputError):
        xla_log.parse("fusion_steps { ? }")


@pytest.mark.skipif(not glob.glob(str(REPO / "sample_dumps/gpu-current-*/*/*.priority_fusion_dump.txt")),
                    reason="no sample logs")
def test_every_sample_log_reads_and_its_module_parses():
    for path in glob.glob(str(REPO / "sample_dumps/gpu-current-*/*/*.priority_fusion_dump.txt")):
        log = xla_log.load(path)
        assert log.device_info.get("core_count") in (68, 132), path
        module = loads(log.module_before_fusion)
        names = {i.name for _, i in module.instructions()}
        for step in log.steps:
            # every producer of the log is an input instruction or a fusion the log created
            assert step.producer in names or any(f.fusion == step.producer for f in log.fusions), (path, step)
        assert xla_log.find(Path(path).parent) == Path(path)
