"""All human text of the commands: one module per command (``audit``, ``arch``, ``can_run``,
``doctor``, ``manifest``, ``build``, ``smoke``), ``common`` for the shared pieces (consoles,
formats, JSON, Markdown tables) and ``verdict_labels`` for can-run's and doctor's verdict labels.
Nothing here decides anything; JSON comes from each result's ``to_json_dict``."""
