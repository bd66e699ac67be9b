from exactly.cli.main import main

main()
