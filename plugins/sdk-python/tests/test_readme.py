"""The README's example plugin runs as written: it is executed and reconciles a sample parent."""

import json
import re
from pathlib import Path


def test_the_readme_example_reconciles():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    (source,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(source, "README.md", "exec"), namespace)
    parent = {"apiVersion": "example.com/v1", "kind": "Thing",
              "metadata": {"name": "a", "namespace": "default", "generation": 1},
              "spec": {"size": 2}}
    desired = namespace["operator"].run_reconcile(json.dumps(parent), [])
    (deployment,) = desired.children
    assert deployment["spec"]["replicas"] == 2
    assert desired.status.conditions[0].reason == "Pending"
