"""Binary inspection: ELF, fatbin containers, ar archives and wheels, read-only and streamed."""
