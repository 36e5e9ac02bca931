from genimpute.cli import main

main()
