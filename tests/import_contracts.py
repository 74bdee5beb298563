"""An import-linter contract type for the layer contract in pyproject.toml (not a test module): `acyclic`, no
import cycle among the modules of a package, imports inside functions included. The layers contract keeps the
packages in order; this one keeps the modules inside each package in order too."""

from __future__ import annotations

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AcyclicContract(Contract):
    """`package`: every module under it; a cycle is a set of modules that import each other, directly or not."""

    type_name = "acyclic"
    package = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        root = str(self.package)
        modules = sorted(m for m in graph.modules if m == root or m.startswith(f"{root}."))
        imports = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in modules) for m in modules}
        groups = sorted(sorted(group) for group in strongly_connected(modules, imports) if len(group) > 1)
        cycles = [{"modules": group, "loop": loop(graph, group)} for group in groups]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(f"{len(cycle['modules'])} modules import each other: {', '.join(cycle['modules'])}")
            output.print_error(f"  e.g. {' -> '.join(cycle['loop'])}", bold=False)
            output.new_line()


def strongly_connected(modules: list[str], imports: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively: modules that can each reach the others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(imports[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, todo = work[-1]
            nxt = next(todo, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(imports[nxt])))
                elif nxt in on_stack:
                    low[module] = min(low[module], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                groups.append(group)
    return groups


def loop(graph: ImportGraph, group: list[str]) -> list[str]:
    """One shortest way round the cycle from its first module: first -> ... -> first (it never leaves the group)."""
    first = group[0]
    successors = [m for m in graph.find_modules_directly_imported_by(first) if m in group]
    back = min((graph.find_shortest_chain(importer=m, imported=first) for m in successors), key=len)
    return [first, *back]


def package_graph(root: str = "pipeline_kit") -> dict[str, list[str]]:
    """Each subpackage (or top-level module) of ROOT -> the ones it imports, imports inside functions included."""
    import grimp

    graph = grimp.build_graph(root)

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == root:
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(f"{root}.") and part(imported) != part(module):
                out.setdefault(part(module), set()).add(part(imported))
        out.setdefault(part(module), set())
    return {k: sorted(v) for k, v in sorted(out.items())}


if __name__ == "__main__":  # python tests/import_contracts.py: the package-level import graph, one line a package
    for package, imports in package_graph().items():
        print(
            f"{package.removeprefix('pipeline_kit.')} -> {', '.join(i.removeprefix('pipeline_kit.') for i in imports) or '-'}"
        )
