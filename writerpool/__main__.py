from writerpool.cli.main import main

main()
