"""Which CPUs compute bfloat16 natively, and the one warning a run asking for it elsewhere gets."""
import logging

from bert_tf.model.precision import cpu_has_bfloat16, warn_if_emulated

# The flags lines of the two CPUs this project's machines have been seen with (abridged to the relevant part).
ZEN4 = "flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 vaes\n"
ZEN2 = "flags\t\t: fpu sse2 avx avx2 fma sha_ni clzero\n"
GRAVITON3 = "Features\t: fp asimd sve bf16 i8mm\n"


def test_zen4_and_arm_bf16_compute_bfloat16_natively_and_zen2_does_not(tmp_path):
    for name, text, native in (("zen4", ZEN4, True), ("zen2", ZEN2, False), ("graviton3", GRAVITON3, True)):
        (tmp_path / name).write_text("processor\t: 0\n" + text, encoding="utf-8")
        assert cpu_has_bfloat16(str(tmp_path / name)) is native, name
    assert cpu_has_bfloat16(str(tmp_path / "missing")) is False


def test_bfloat16_on_a_cpu_without_it_warns_once_naming_the_cost(tmp_path, caplog):
    zen2, zen4 = tmp_path / "zen2", tmp_path / "zen4"
    zen2.write_text(ZEN2, encoding="utf-8")
    zen4.write_text(ZEN4, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="bert_tf.model.precision"):
        assert warn_if_emulated("--mixed_precision=mixed_bfloat16", str(zen2)) is True
        warn_if_emulated("--mixed_precision=mixed_bfloat16", str(zen2))
        assert warn_if_emulated("--mixed_precision=mixed_bfloat16", str(zen4)) is False
    warned = [r.getMessage() for r in caplog.records if r.name == "bert_tf.model.precision"]
    assert len(warned) == 1
    assert warned[0].startswith("--mixed_precision=mixed_bfloat16 asks for bfloat16, but this CPU has no bfloat16")
    assert "float32 is faster on this machine" in warned[0]
