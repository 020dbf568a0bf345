"""Images: the locally made Debian base image (``baseimage``; an archive copy past its
``Valid-Until``, ``apt_release``), the builder image on it
(``builder_image``), the base a build's Python is built on (``python_base``) and nvcc's host
compiler there (``host_compiler``), and the toolkit and
torch image a torch-extension build compiles against (``toolkit``).

May import the rooms ``recipes`` and ``compile`` and the floors below.
"""
