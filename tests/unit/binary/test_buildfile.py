"""The build-file reader on ninja's own rules and on hostile text (binary/buildfile.py)."""

from __future__ import annotations

import time

import pytest

from archwheel.binary.buildfile import (
    NinjaError,
    expand,
    nvcc_images,
    read_compile_commands,
    read_ninja,
    shell_words,
)
from archwheel.errors import InputError

RULES = """\
rule CUDA_COMPILER__t_Release
  depfile = $DEP_FILE
  command = ${LAUNCHER}${CODE_CHECK}/usr/bin/nvcc -forward-unknown-to-host-compiler $DEFINES $
$INCLUDES $FLAGS -MD -MT $out -MF $DEP_FILE -x cu -c $in -o $out
rule CXX_COMPILER__t_Release
  command = /usr/bin/c++ $FLAGS -o $out -c $in
"""


def _images(text: str) -> list[frozenset[str]]:
    steps = read_ninja(text)
    return [nvcc_images(s.argv).images for s in steps.cuda]


def test_cmake_shape_with_continuations_and_escapes() -> None:
    text = RULES + (
        "build a$ b.cu.o: CUDA_COMPILER__t_Release /s/a$ b.cu || order\n"
        "  FLAGS = -gencode arch=compute_80,code=sm_80 $\n"
        "      -gencode arch=compute_90,code=sm_90 -DX=$$HOME\n"
        "build c.o: CXX_COMPILER__t_Release /s/c.cpp\n"
        "  FLAGS = -O2\n"
    )
    steps = read_ninja(text)
    assert steps.languages == {"CUDA": 1, "CXX": 1} and steps.builds == 2
    (step,) = steps.cuda
    assert step.source == "/s/a b.cu" and step.output == "a b.cu.o"
    assert step.argv[0] == "/usr/bin/nvcc"
    assert "/s/a b.cu" in step.argv  # $in quoted for the shell, unquoted by the split
    assert "-DX=$HOME" in step.argv  # $$ is a literal $
    assert nvcc_images(step.argv).images == {"sm_80", "sm_90"}


def test_build_bindings_shadow_rule_and_file_scope() -> None:
    text = (
        "FLAGS = -arch=sm_75\n"
        "rule cu\n  FLAGS = -arch=sm_70\n  command = nvcc $FLAGS -c $in -o $out\n"
        "build a.o: cu a.cu\n"  # the rule's own FLAGS
        "build b.o: cu b.cu\n  FLAGS = -gencode=arch=compute_90,code=[sm_90,compute_90]\n"
        "rule cu2\n  command = nvcc $FLAGS -c $in\n"
        "build c.o: cu2 c.cu\n"  # the file's FLAGS
    )
    assert _images(text) == [
        {"sm_70", "compute_70"},
        {"sm_90", "compute_90"},
        {"sm_75", "compute_75"},
    ]


def test_paths_see_the_builds_own_bindings() -> None:
    text = "d = top\nrule cu\n  command = nvcc -arch=sm_90 -c $in\nbuild $d/x.o: cu $d/x.cu\n  d = own\n"
    (step,) = read_ninja(text).cuda
    assert (step.output, step.source) == ("own/x.o", "own/x.cu")


def test_top_level_values_expand_where_they_stand() -> None:
    text = (
        "A = -arch=sm_80\nB = $A\nA = -arch=sm_90\n"
        "rule cu\n  command = nvcc ${B} -c $in\nbuild x.o: cu x.cu\n"
    )
    assert _images(text) == [{"sm_80", "compute_80"}]


def test_include_and_subninja_scopes() -> None:
    files = {
        "rules.ninja": "rule cu\n  command = nvcc $FLAGS -c $in\n",
        "sub.ninja": "FLAGS = -arch=sm_90\nbuild s.o: cu s.cu\n",
    }
    text = (
        "FLAGS = -arch=sm_80\ninclude rules.ninja\nsubninja sub.ninja\nbuild t.o: cu t.cu\n"
        "include missing.ninja\n"
    )
    steps = read_ninja(text, files.get)
    images = [nvcc_images(s.argv).images for s in steps.cuda]
    assert images == [{"sm_90", "compute_90"}, {"sm_80", "compute_80"}]  # the child's own FLAGS
    assert steps.problems == ("build.ninja:5: missing.ninja was not read",)


def test_arch_and_code_forms() -> None:
    cases = {
        "nvcc -c x.cu -arch=compute_80 -code=sm_80,compute_80": {"sm_80", "compute_80"},
        "nvcc -c x.cu --gpu-architecture compute_90a --gpu-code sm_90a": {"sm_90a"},
        "nvcc -c x.cu -arch=compute_80": {"compute_80"},
        "nvcc -c x.cu --generate-code=arch=compute_100,code=[compute_100,sm_100]": {
            "sm_100", "compute_100"},
        "nvcc -c x.cu -gencode 'arch=compute_120,code=\"sm_120,lto_120\"'": {"sm_120", "lto_120"},
    }  # fmt: skip
    for command, expected in cases.items():
        assert nvcc_images(shell_words(command)).images == expected, command
    native = nvcc_images(shell_words("nvcc -c x.cu -arch=native"))
    assert native.images == frozenset() and "native" in native.problems[0]
    bare = nvcc_images(shell_words("nvcc -c x.cu"))
    assert bare.problems == ("no -gencode, -arch or -code: nvcc's default arch",)


def test_only_compiling_nvcc_is_a_step() -> None:
    text = (
        "rule v\n  command = nvcc --version > $out\nbuild v.txt: v\n"
        "rule cd\n  command = cd /b && ccache /opt/cuda/bin/nvcc -arch=sm_90 -dc $in && true\n"
        "build d.o: cd d.cu\n"
        "rule gen\n  command = python gen.py --nvcc-flags x\nbuild g.cu: gen g.py\n"
    )
    steps = read_ninja(text)
    assert [s.source for s in steps.cuda] == ["d.cu"]
    assert steps.cuda[0].argv[-2:] == ("-dc", "d.cu")  # stops at &&


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rule r\n  command = nvcc $!x\nbuild a: r\n", "bad \\$-escape"),
        ("x = $!\n", "bad \\$-escape"),
        ("build a: nosuch b\n", "unknown build rule 'nosuch'"),
        ("build a b\n", "without ':'"),
        ("build a: \n", "without a rule"),
        ("  x = 1\n", "indented line outside"),
        ("what is this\n", "not a ninja statement"),
        ("rule r\n  command = $command\nbuild a: r\n", "refers to itself"),
    ],
)
def test_hostile_text_is_one_line_error(text: str, message: str) -> None:
    with pytest.raises(NinjaError, match=message) as info:
        read_ninja(text)
    assert "\n" not in str(info.value) and isinstance(info.value, InputError)


def test_include_loops_stop() -> None:
    with pytest.raises(NinjaError, match="nested past"):
        read_ninja("include self.ninja\n", lambda name: "include self.ninja\n")


def test_expansion_bomb_is_bounded() -> None:
    lines = ["a0 = " + "x" * 1000]
    lines += [f"a{i} = $a{i - 1}$a{i - 1}" for i in range(1, 40)]
    with pytest.raises(NinjaError, match="expands past"):
        read_ninja("\n".join(lines) + "\n")


def test_escapes() -> None:
    values = {"x": "X", "y-z": "YZ"}
    assert expand("a$ b$:c$$d${x}$y-z", lambda name: values.get(name, "")) == "a b:c$dXYZ"
    assert shell_words("""a 'b c' "d \\"e\\"" f\\ g""") == ("a", "b c", 'd "e"', "f g")


def test_two_thousand_steps_in_well_under_a_second() -> None:
    flags = " ".join(f"-I/include/{i}" for i in range(60))
    builds = []
    for i in range(2000):
        rule = "CUDA_COMPILER__t_Release" if i % 6 == 0 else "CXX_COMPILER__t_Release"
        builds.append(
            f"build o{i}.o: {rule} /s/f{i}.cu || order\n  INCLUDES = {flags}\n"
            "  FLAGS = -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90\n"
        )
    text = RULES + "".join(builds)
    start = time.perf_counter()
    steps = read_ninja(text)
    images = [nvcc_images(s.argv) for s in steps.cuda]
    took = time.perf_counter() - start
    assert len(images) == 334 and steps.builds == 2000
    assert took < 1.5, took  # 0.4 s measured on a loaded 2-core machine


def test_compile_commands() -> None:
    steps = read_compile_commands(
        [
            {"directory": "/b", "file": "/s/a.cu", "output": "a.o",
             "command": "/usr/bin/nvcc -gencode arch=compute_80,code=sm_80 -c /s/a.cu -o a.o"},
            {"directory": "/b", "file": "/s/b.cu",
             "arguments": ["nvcc", "-arch=sm_90", "-c", "/s/b.cu"]},
            {"directory": "/b", "file": "/s/c.cpp", "command": "c++ -c /s/c.cpp"},
        ]
    )  # fmt: skip
    assert [nvcc_images(s.argv).images for s in steps.cuda] == [
        {"sm_80"},
        {"sm_90", "compute_90"},
    ]
    with pytest.raises(InputError, match="entry 0 has no command"):
        read_compile_commands([{"file": "x"}])
    with pytest.raises(InputError, match="expected a list"):
        read_compile_commands({"file": "x"})


def test_torch_cpp_extension_shape() -> None:
    # torch.utils.cpp_extension writes the flags as file-level variables and the archs after $in
    text = (
        "ninja_required_version = 1.3\ncxx = c++\nnvcc = /usr/local/cuda/bin/nvcc\n\n"
        "cflags = -pthread -I/usr/include/python3.11 -c\n"
        "post_cflags = -O3 '-DPYBIND11_COMPILER_TYPE=\"_gcc\"' -std=c++17\n"
        "cuda_cflags = -I/usr/local/cuda/include -c\n"
        "cuda_post_cflags = -D__CUDA_NO_HALF_OPERATORS__ --expt-relaxed-constexpr "
        "--compiler-options ''\"'\"'-fPIC'\"'\"'' -O3 "
        "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 -std=c++17\n"
        "cuda_dlink_post_cflags = \nldflags = \n\n"
        "rule compile\n  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out $post_cflags\n"
        "  depfile = $out.d\n  deps = gcc\n\n"
        "rule cuda_compile\n  depfile = $out.d\n  deps = gcc\n"
        "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d "
        "$cuda_cflags -c $in -o $out $cuda_post_cflags\n\n"
        "build /b/temp/csrc/a.o: cuda_compile /s/csrc/a.cu\n"
        "build /b/temp/csrc/b.o: compile /s/csrc/b.cpp\n"
    )
    steps = read_ninja(text)
    (step,) = steps.cuda
    assert step.source == "/s/csrc/a.cu" and step.rule == "cuda_compile"
    assert "'-fPIC'" in step.argv  # the shell's quoting undone once, as sh would
    assert nvcc_images(step.argv).images == {"sm_80", "sm_90"}
