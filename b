13440 bash 0 0
