"""METADATA files as build backends write them, generated (hypothesis strategies).

Each template follows what the backend's own writer does, checked against METADATA files of
wheels it built (the test environment's site-packages hold some of each):

- setuptools: ``rfc822_escape`` folds a multi-line value with eight spaces after each line end
  (``str.splitlines(keepends=True)``, so a form feed ends a line too), an empty line of the text
  becomes ``"        "``; a ``License`` text of a BSD licence is the common case (kiwisolver's
  METADATA); the description in the body, or (bdist_wheel of old setuptools) in a folded
  ``Description`` header;
- hatchling: the ``License`` text line by line, every line after the first indented by eight
  spaces (an empty one is eight spaces); extras as ``; extra == 'x'``;
- scikit-build-core (pyproject-metadata): ``Author-Email`` spelt so, the text folded with eight
  spaces; ``License-Expression``;
- flit: ``Requires-Dist: name >=1.0 ; extra == "x"`` (spaces before the specifier and marker);
- maturin: ``fold_header``: wrapped at 78 columns with ``\\r\\n\\t`` between lines, an empty line
  a lone tab; ``Description-Content-Type`` with parameters.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

REQUIREMENTS = (
    "torch==2.14.1",
    "torch>=2.13.0,<2.16",
    "numpy>=1.26",
    "packaging",
    'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
    "nvidia-cuda-runtime-cu12==12.8.90",
    'typing-extensions>=4.0; python_version < "3.12"',
    "cuda-toolkit[cudart]==13.0.3",
)
EXTRAS = ("test", "docs", "cuda")
_WORDS = ("Copyright", "(c)", "2024,", "the", "authors", "THIS", "SOFTWARE", "IS", "PROVIDED",
          "Name:", "Requires-Dist:", "torch==9", "From", "-", "*", "é", "‘quoted’")  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """One generated METADATA and what its writer put in it."""

    backend: str
    text: str
    name: str
    version: str
    requires: tuple[str, ...]
    requires_python: str


def _line() -> st.SearchStrategy[str]:
    words = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8).map(" ".join)
    # indented lines, form feeds (GPL texts hold them) and trailing spaces as licences have
    return st.tuples(st.sampled_from(("", "", " ", "    ", "\x0c")), words,
                     st.sampled_from(("", "", "  "))).map("".join)  # fmt: skip


@st.composite
def license_texts(draw: st.DrawFn) -> str:
    """A multi-line licence: paragraphs with empty lines between them, maybe a final newline."""
    paragraphs = draw(st.lists(st.lists(_line(), min_size=1, max_size=4), min_size=1, max_size=5))
    gap = draw(st.sampled_from(("\n\n", "\n\n\n", "\n \n")))
    text = gap.join("\n".join(lines) for lines in paragraphs)
    return text + draw(st.sampled_from(("", "\n")))


@st.composite
def descriptions(draw: st.DrawFn) -> str:
    """A README: headings, empty lines, lines that look like fields (a body is no header)."""
    lines = draw(
        st.lists(
            st.sampled_from(
                (
                    "# myext",
                    "",
                    "Requires-Dist: evil==1",
                    "Name: other",
                    "  code",
                    "From here on",
                    "Version: 0",
                    "text, more text",
                    "\t",
                )
            ),
            max_size=12,
        )
    )
    return "\n".join(lines)


def _setuptools_escape(text: str) -> str:
    indent = 8 * " "
    lines = text.splitlines(keepends=True)
    ends_in_newline = bool(lines) and lines[-1].splitlines()[0] != lines[-1]
    return indent.join(lines) + (indent if ends_in_newline else "")


def _indent_lines(text: str, indent: str = 8 * " ") -> str:
    first, *rest = text.split("\n")
    return "".join([first, *(f"\n{indent}{line}" for line in rest)])


def _maturin_fold(text: str) -> str:
    out: list[str] = []
    for whole in text.split("\n"):
        rest = whole
        while len(rest) > 78:
            out.append(rest[:78].rstrip())
            rest = rest[78:]
        out.append(rest.rstrip())
    return "\r\n".join(line if not i else "\t" + line for i, line in enumerate(out))


@st.composite
def shapes(draw: st.DrawFn) -> Shape:
    """A METADATA of one backend, with generated name, version, licence, requirements, body."""
    backend = draw(st.sampled_from(("setuptools", "hatchling", "scikit-build-core", "flit",
                                    "maturin")))  # fmt: skip
    name = draw(st.sampled_from(("myext", "torch_scatter", "flash-attn", "My.Ext")))
    version = draw(st.sampled_from(("1.0", "2.1.2+pt2.14.1cu130", "0.1.dev3", "3.0.0rc1")))
    plain = tuple(draw(st.lists(st.sampled_from(REQUIREMENTS), max_size=5, unique=True)))
    extras = tuple(draw(st.lists(st.sampled_from(EXTRAS), max_size=2, unique=True)))
    python = draw(st.sampled_from((">=3.9", ">=3.10,<3.14", "")))
    license_text = draw(license_texts())
    body = draw(descriptions())
    in_header = backend == "setuptools" and draw(st.booleans())
    quote = '"' if backend in ("setuptools", "scikit-build-core", "flit") else "'"

    def extra_req(extra: str) -> str:
        if backend == "flit":
            return f"pytest >=7 ; extra == {quote}{extra}{quote}"
        return f"pytest>=7; extra == {quote}{extra}{quote}"

    requires = plain + tuple(extra_req(e) for e in extras)
    if backend == "flit":
        requires = tuple(r.replace(">=", " >=").replace("; ", " ; ") for r in requires)
    lines: list[tuple[str, str]] = [
        ("Metadata-Version", draw(st.sampled_from(("2.1", "2.2", "2.4")))),
        ("Name", name),
        ("Version", version),
        ("Summary", "CUDA kernels for torch"),
    ]
    if backend == "setuptools":
        lines += [("Home-page", "https://example.org/myext"), ("Author", "A. Author"),
                  ("License", _setuptools_escape(license_text))]  # fmt: skip
        if in_header:
            lines.append(("Description", _setuptools_escape(body)))
        lines += [("Platform", "UNKNOWN"), ("Classifier", "Programming Language :: Python :: 3")]
    elif backend == "hatchling":
        lines += [("Project-URL", "Source, https://example.org"),
                  ("Author-email", "A. Author <a@example.org>"),
                  ("License", _indent_lines(license_text.rstrip("\n"))),
                  ("License-File", "LICENSE"), ("Keywords", "cuda,torch")]  # fmt: skip
    elif backend == "scikit-build-core":
        lines += [("Keywords", "cuda,torch"), ("Author-Email", "A. Author <a@example.org>"),
                  ("License", _indent_lines(license_text.strip("\n"))),
                  ("Classifier", "Programming Language :: C++")]  # fmt: skip
    elif backend == "flit":
        lines += [("Author-email", "A. Author <a@example.org>"),
                  ("Description-Content-Type", "text/x-rst"),
                  ("License-Expression", "MIT"), ("License-File", "LICENSE")]  # fmt: skip
    else:
        lines += [("Classifier", "Programming Language :: Rust"),
                  ("License", _maturin_fold(license_text.strip("\n"))),
                  ("License-File", "LICENSE")]  # fmt: skip
    if python:
        lines.append(("Requires-Python", python))
    lines += [("Requires-Dist", r) for r in plain if backend != "flit"]
    lines += [("Provides-Extra", e) for e in extras]
    lines += [("Requires-Dist", r) for r in requires if backend == "flit" or "extra ==" in r]
    if backend == "maturin":
        lines.append(("Description-Content-Type", "text/markdown; charset=UTF-8; variant=GFM"))
    elif backend != "flit":
        lines.append(("Description-Content-Type", "text/markdown"))
    text = "".join(f"{key}: {value}\n" for key, value in lines)
    if not in_header and body:
        text += "\n" + body + draw(st.sampled_from(("", "\n")))
    return Shape(backend, text, name, version, requires, python)
