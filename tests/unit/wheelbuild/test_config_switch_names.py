"""Switch names a project keeps in a config file of its own (TOML, JSON, setup.cfg through
configparser): the source check follows them to the name, the plan's module selection reads the
modules it selects, and a name built at run time is not followed."""

from __future__ import annotations

from pathlib import Path

import pytest

from archwheel.facts.arch import ArchList
from archwheel.verdicts.config_names import config_constants
from archwheel.verdicts.source_archs import check_build_files
from archwheel.wheelbuild.sources.source_check import look_at_source

MODULES = ("scan", "sort", "topk")
BODY = 'ops = os.environ.get(ENV, "").split(",")\next_modules = []\n' + "".join(
    f'if "{m}" in ops:\n'
    f'    ext_modules.append(CUDAExtension("myext._{m}", ["csrc/{m}.cpp", "csrc/{m}_k.cu"]))\n'
    for m in MODULES
)
HEAD = (
    "import configparser, json, os, tomllib\n"
    "from pathlib import Path\n"
    "from torch.utils.cpp_extension import CUDAExtension\n"
)
# (the lines that bind ENV, the config files): each binds ENV to MYEXT_OPS
FORMS = {
    "toml": (
        'ENV = tomllib.load(open("build.toml", "rb"))["build"]["env_name"]\n',
        {"build.toml": '[build]\nenv_name = "MYEXT_OPS"\n'},
        "build.toml['build']['env_name'] via setup.py:4",
    ),
    "toml-with": (
        'with open(os.path.join(os.path.dirname(__file__), "build.toml"), "rb") as f:\n'
        "    CONF = tomllib.load(f)\n"
        'ENV = CONF["env_name"]\n',
        {"build.toml": 'env_name = "MYEXT_OPS"\n'},
        "build.toml['env_name'] via setup.py:6",
    ),
    "json": (
        'ENV = json.loads(Path("config/build.json").read_text()).get("env", "X")\n',
        {"config/build.json": '{"env": "MYEXT_OPS"}'},
        "config/build.json['env'] via setup.py:4",
    ),
    "setup.cfg": (
        "cfg = configparser.ConfigParser()\n"
        'cfg.read("setup.cfg")\n'
        'ENV = cfg.get("build", "ops_env")\n',
        {"setup.cfg": "[metadata]\nname = myext\n[build]\nops_env = MYEXT_OPS\n"},
        "setup.cfg['build']['ops_env'] via setup.py:6",
    ),
    "cfg-subscript": (
        'cfg = configparser.ConfigParser()\ncfg.read("setup.cfg")\nENV = cfg["build"]["ops_env"]\n',
        {"setup.cfg": "[build]\nops_env = MYEXT_OPS\n"},
        "setup.cfg['build']['ops_env'] via setup.py:6",
    ),
}


def _project(tmp_path: Path, binding: str, configs: dict[str, str]) -> dict[str, str]:
    files = {"setup.py": HEAD + binding + BODY, **configs}
    files.update({f"csrc/{m}.cpp": "" for m in MODULES})
    files.update({f"csrc/{m}_k.cu": "" for m in MODULES})
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


@pytest.mark.parametrize("form", list(FORMS))
def test_a_switch_name_from_a_config_file_is_followed_to_the_modules(
    tmp_path: Path, form: str
) -> None:
    binding, configs, via = FORMS[form]
    files = _project(tmp_path, binding, configs)
    look = look_at_source(
        tmp_path, tuple(files), "TORCH_CUDA_ARCH_LIST", ArchList.parse("9.0"),
        recipe_env={"MYEXT_OPS": "scan"},
    )  # fmt: skip
    (switch,) = [s for s in look.check.switch_details if s.name == "MYEXT_OPS"]
    assert switch.via == via
    assert f"its name from {via}" in switch.shown()
    assert look.selection is not None
    assert look.selection.switch == "MYEXT_OPS"
    assert look.selection.built() == ("csrc/scan_k.cu",)
    assert look.selection.left_out() == ("csrc/sort_k.cu", "csrc/topk_k.cu")


@pytest.mark.parametrize(
    ("binding", "configs"),
    [
        # the file's name is computed
        ('ENV = tomllib.load(open(NAME, "rb"))["env_name"]\n', {"build.toml": 'env_name = "A"\n'}),
        # a key the file does not have, a value that is no name, a file not in the project
        ('ENV = tomllib.load(open("build.toml", "rb"))["other"]\n', {"build.toml": 'x = "A"\n'}),
        ('ENV = tomllib.load(open("build.toml", "rb"))["n"]\n', {"build.toml": 'n = "A B"\n'}),
        ('ENV = json.load(open("gone.json"))["env"]\n', {}),
        # a broken file
        ('ENV = json.load(open("b.json"))["env"]\n', {"b.json": '{"env": '}),
        # the key is computed
        ('ENV = tomllib.load(open("build.toml", "rb"))[KEY]\n', {"build.toml": 'k = "A"\n'}),
    ],
)
def test_a_name_built_at_run_time_is_not_followed(binding: str, configs: dict[str, str]) -> None:
    text = HEAD + binding + BODY
    files = {"setup.py": text, **configs}
    assert config_constants("setup.py", text, files.get) == {}
    check = check_build_files([("setup.py", text)], "TORCH_CUDA_ARCH_LIST", read=files.get)
    assert not any(s.via for s in check.switch_details)


def test_a_build_file_in_a_folder_reads_its_config_beside_it() -> None:
    text = 'import tomllib\nENV = tomllib.load(open("ops.toml", "rb"))["env"]\n'
    files = {"python/setup.py": text, "python/ops.toml": 'env = "PKG_OPS"\n'}
    assert config_constants("python/setup.py", text, files.get) == {
        "ENV": ("PKG_OPS", "python/ops.toml['env'] via python/setup.py:2")
    }
