"""Tests for simdist.hardware.device_spec: tf.DeviceSpec strings, merging nested device scopes."""


import pytest

from simdist.hardware.device_spec import DeviceSpec, DeviceSpecError, canonical_device, merge_device
from simdist.base.errors import InvalidArgumentError

from tests.conftest import literal




def test_device_spec_error_class():
    assert issubclass(DeviceSpecError, InvalidArgumentError)


@pytest.mark.parametrize("text, fields, canonical", [
    ("/job:worker/replica:0/task:1/device:GPU:0", ("worker", 0, 1, "GPU", 0),
     "/job:worker/replica:0/task:1/device:GPU:0"),
    ("/job:ps/task:0/cpu:0", ("ps", None, 0, "CPU", 0), "/job:ps/task:0/device:CPU:0"),
    ("/gpu:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("/cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/device:CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/device:GPU:*", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("/device:gpu:2", (None, None, None, "GPU", 2), "/device:GPU:2"),
    ("/gpu", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("", (None, None, None, None, None), ""),
    ("/job:worker", ("worker", None, None, None, None), "/job:worker"),
    ("GPU:0", (None, None, None, "GPU", 0), "/device:GPU:0"),
    ("/device:TPU_SYSTEM:0", (None, None, None, "TPU_SYSTEM", 0), "/device:TPU_SYSTEM:0"),
    ("/device:XLA_CPU:1", (None, None, None, "XLA_CPU", 1), "/device:XLA_CPU:1"),
    ("/epu:2", (None, None, None, "EPU", 2), "/device:EPU:2"),
    ("/job:worker/job:ps/task:1/task:2", ("ps", None, 2, None, None), "/job:ps/task:2"),
    ("/device:TPU:3/task:2/job:local", ("local", None, 2, "TPU", 3),
     "/job:local/task:2/device:TPU:3"),
])
def test_device_spec_parse_and_print(text, fields, canonical):
    spec = DeviceSpec.from_string(text)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == fields
    assert spec.to_string() == canonical == str(spec) == canonical_device(text)
    assert DeviceSpec.from_string(canonical) == spec  # round trip


@pytest.mark.parametrize("text, component", [
    ("/foo:1", "'foo:1'"),
    ("/job:worker/task:x", "'task:x'"),
    ("/job:worker/task:-1", "'task:-1'"),
    ("/tpu_system:0", "'tpu_system:0'"),
    ("TPU_SYSTEM:0", "'TPU_SYSTEM:0'"),
    ("/gpu:0/device:CPU:0", "'device:CPU:0'"),
    ("/device::0", "'device::0'"),
    ("/fpga:0", "'fpga:0'"),
    ("/device:GPU", "'device:GPU'"),
    ("/job:", "'job:'"),
    ("/replica:0:1", "'replica:0:1'"),
    ("/gpu:0:1", "'gpu:0:1'"),
])
def test_device_spec_malformed(text, component):
    with pytest.raises(DeviceSpecError, match=literal(repr(text))) as info:
        DeviceSpec.from_string(text)
    message = str(info.value)
    assert component in message
    assert "/job:<name>/replica:<int>/task:<int>/device:<TYPE>:<int>" in message


def test_device_spec_bad_fields():
    with pytest.raises(DeviceSpecError, match=literal("'a/b'")):
        DeviceSpec(device_type="a/b")
    assert DeviceSpec(device_type="FPGA").to_string() == "/device:FPGA:*"  # as TF
    with pytest.raises(DeviceSpecError, match="-1"):
        DeviceSpec(task=-1)
    with pytest.raises(DeviceSpecError, match="5"):
        DeviceSpec.from_string(5)
    assert DeviceSpec(job="ps", device_type="gpu", device_index=0).to_string() == \
        "/job:ps/device:GPU:0"


def test_device_spec_merge_and_replace():
    outer = DeviceSpec.from_string("/job:worker/task:1/device:CPU:0")
    merged = outer.make_merged_spec(DeviceSpec.from_string("/device:GPU:1"))
    assert merged.to_string() == "/job:worker/task:1/device:GPU:1"
    assert outer.to_string() == "/job:worker/task:1/device:CPU:0"  # unchanged
    assert outer.replace(task=3).to_string() == "/job:worker/task:3/device:CPU:0"
    # TF's field-by-field merge: a type without an index keeps the outer index.
    assert outer.make_merged_spec(DeviceSpec(device_type="GPU")).to_string() == \
        "/job:worker/task:1/device:GPU:0"


@pytest.mark.parametrize("outer, inner, expected", [
    ("/job:worker/task:1", "/gpu:0", "/job:worker/task:1/device:GPU:0"),
    ("/job:worker/task:1/device:CPU:0", "/device:GPU:1", "/job:worker/task:1/device:GPU:1"),
    ("/job:train", "/job:ps/device:GPU:0", "/job:ps/device:GPU:0"),
    ("/job:ps/task:0", "", "/job:ps/task:0"),
    ("", "/cpu:0", "/device:CPU:0"),
    ("/job:worker/replica:0/task:0", "/task:2", "/job:worker/replica:0/task:2"),
])
def test_merge_device(outer, inner, expected):
    assert merge_device(outer, inner) == expected


@pytest.mark.parametrize("text", ["/job:", "/task:-1", "/device:GPU:-2", "/device::0"])
def test_device_strings_tf_accepts_and_simdist_refuses_say_so(text):
    with pytest.raises(DeviceSpecError, match="TensorFlow accepts this; simdist does not"):
        DeviceSpec.from_string(text)


def test_merge_device_rejects_malformed():
    with pytest.raises(DeviceSpecError, match=literal("'/bogus:1'")):
        merge_device("/job:worker", "/bogus:1")
